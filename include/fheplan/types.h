/* fheplan/types.h — the small value types every layer shares: status codes, the
 * caller-owned error record, locations, handles and streams. No state lives here. */
#ifndef FHEPLAN_TYPES_H
#define FHEPLAN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FHR_API __attribute__((visibility("default")))
#else
#define FHR_API
#endif

/* Every fallible call returns one of these. FHR_OK is zero; all failures are positive. */
typedef enum fhr_status {
    FHR_OK = 0,
    FHR_E_INVALID,     /* a malformed argument (NULL, zero size, bad text form) */
    FHR_E_HANDLE,      /* foreign, forged or discarded handle */
    FHR_E_LOCATION,    /* invalid location, or a CUDA index this process cannot see */
    FHR_E_REPLICA,     /* replica-mode rule broken (ensure on EXCLUSIVE, ...) */
    FHR_E_STATE,       /* the value has no copy where the call needs one, or already has one */
    FHR_E_PRESERVE,    /* would remove the last copy of a MUST_PRESERVE value */
    FHR_E_PROTECTED,   /* copy is leased, held or has a pending consumer event */
    FHR_E_BUDGET,      /* strict budget would be exceeded */
    FHR_E_REENTRANT,   /* called while a source load runs on this manager */
    FHR_E_NOMEM,       /* host allocation for bookkeeping failed */
    FHR_E_BACKEND,     /* allocation, copy, stream or event failure in the backend */
    FHR_E_SOURCE,      /* a source load failed or returned a value that breaks its spec */
    FHR_E_STALE,       /* a decision was made against an older state version */
    FHR_E_PLAN,        /* a plan failed at runtime; see fhr_error.phase/action_index */
    FHR_E_INFEASIBLE,  /* preflight or explain found the plan/request cannot succeed */
    FHR_E_LEASE,       /* lease or hold misuse (double release, missing consumer stream) */
    FHR_E_SCOPE,       /* scope misuse (entered twice, exit before entry) */
    FHR_E_UNSUPPORTED, /* the backend cannot do this */
    FHR_STATUS_COUNT_
} fhr_status;

/* Stable short name of a status: "budget", "protected", ... */
FHR_API const char *fhr_status_name(fhr_status st);

/* Phases of plan execution, used in errors and reports. */
typedef enum fhr_phase {
    FHR_PHASE_NONE = 0,
    FHR_PHASE_PREFLIGHT,
    FHR_PHASE_RECLAIM,
    FHR_PHASE_RESERVE,
    FHR_PHASE_ENTER,
    FHR_PHASE_BODY,
    FHR_PHASE_EXIT,
    FHR_PHASE_RELEASE,
    FHR_PHASE_ACTIONS /* execute_actions: one raw sequence */
} fhr_phase;

FHR_API const char *fhr_phase_name(fhr_phase ph);

/* Where a copy lives. Text forms: "host", "pinned", "cuda:N". */
typedef enum fhr_loc_kind {
    FHR_LOC_INVALID = 0,
    FHR_LOC_HOST,   /* pageable host memory */
    FHR_LOC_PINNED, /* page-locked host memory */
    FHR_LOC_CUDA    /* device memory of CUDA device `index` */
} fhr_loc_kind;

#define FHR_MAX_CUDA_DEVICES 62

typedef struct fhr_location {
    fhr_loc_kind kind;
    int index; /* CUDA device index; 0 otherwise */
} fhr_location;

FHR_API fhr_location fhr_loc_host(void);
FHR_API fhr_location fhr_loc_pinned(void);
FHR_API fhr_location fhr_loc_cuda(int index);
FHR_API int fhr_loc_equal(fhr_location a, fhr_location b);
/* Parses "host", "pinned", "cuda:N" (N in 0..61). FHR_E_INVALID on anything else. */
FHR_API fhr_status fhr_loc_parse(const char *text, fhr_location *out);
/* Writes the text form into buf (>= 16 bytes is always enough); returns buf. */
FHR_API const char *fhr_loc_format(fhr_location loc, char *buf, size_t cap);
/* Dense index used for tables: host 0, pinned 1, cuda:N 2+N; -1 if invalid. */
FHR_API int fhr_loc_slot(fhr_location loc);
FHR_API fhr_location fhr_loc_from_slot(int slot);
#define FHR_LOC_SLOTS (2 + FHR_MAX_CUDA_DEVICES)

/* An opaque, copyable, hashable token. Valid only with the manager that issued it. */
typedef struct fhr_handle {
    uint64_t manager_id;
    uint64_t serial; /* 0 is never issued */
} fhr_handle;

FHR_API int fhr_handle_equal(fhr_handle a, fhr_handle b);
FHR_API uint64_t fhr_handle_hash(fhr_handle h);

/* Backend streams and events are opaque; see fheplan/backend.h. */
typedef struct fhr_stream fhr_stream;
typedef struct fhr_event fhr_event;

typedef struct fhr_report fhr_report;

/* Caller-owned error record (jansson's json_error_t style). Pass NULL where a
 * detailed record is not wanted. Plan failures fill phase, action_index and
 * partial_report; budget failures fill loc and bytes_short. Release with
 * fhr_error_clear() (it frees partial_report). */
typedef struct fhr_error {
    fhr_status status;
    char message[512];
    fhr_phase phase;        /* FHR_PHASE_NONE when not a plan failure */
    long action_index;      /* -1 when not tied to an action */
    fhr_status cause;       /* for FHR_E_PLAN: the status of the failing action */
    fhr_handle handle;      /* serial 0 when none */
    fhr_location loc;       /* kind INVALID when none */
    uint64_t bytes_short;   /* budget failures: bytes missing */
    fhr_report *partial_report; /* FHR_E_PLAN: owned by this record */
} fhr_error;

FHR_API void fhr_error_init(fhr_error *err);
FHR_API void fhr_error_clear(fhr_error *err);

#ifdef __cplusplus
}
#endif
#endif
