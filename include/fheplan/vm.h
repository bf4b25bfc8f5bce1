/* fheplan/vm.h — the VM that executes a verified .rplan program against a residency
 * manager, in run mode (real transitions on a CUDA or emulated backend) or explain mode
 * (the same path over the model backend: nothing is allocated or copied, bodies do not
 * run); the body kernel registry; the run report. See fheplan(1) and rplan(5). */
#ifndef FHEPLAN_VM_H
#define FHEPLAN_VM_H

#include <stdio.h>
#include "fheplan/residency.h"
#include "fheplan/rplan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rplan_vm rplan_vm;

typedef enum rplan_vm_mode {
    RPLAN_VM_RUN = 0,    /* real transitions, bodies run */
    RPLAN_VM_EXPLAIN = 1 /* dry run: use with a model backend; bodies are skipped */
} rplan_vm_mode;

/* What a progress callback sees (after every plan or request). */
typedef struct rplan_vm_progress {
    const char *stage;      /* innermost stage path, "" outside stages */
    const char *scope;      /* plan or request just finished */
    size_t done, total;     /* scopes finished / in the program */
    uint64_t bytes_moved;   /* so far */
    double elapsed_s;
} rplan_vm_progress;

typedef struct rplan_vm_opts {
    rplan_vm_mode mode;
    /* Divides every value size, reservation and budget by `scale` (0 or 1: none).
     * Sizes round up to 8 bytes; budgets get 8 bytes of slack per value. */
    uint64_t scale;
    const fhr_budget *budget_override; /* replace or add budgets (after scaling) */
    size_t nbudget_override;
    /* 1: a body whose kernel is not registered runs as `touch` over its value
     * arguments (rehearsal); 0: it fails. */
    int unknown_as_touch;
    /* Pinned host->device bandwidth in GB/s for the lower bound; 0: measure once
     * (or read FHEPLAN_PINNED_GBPS; explain mode: 55.5, measured on an H200). */
    double pinned_gbps;
    /* Device memory bandwidth in GB/s of the kernel model used for predicted body time
     * (touch and verify read their values once, ckks.keyswitch key and ciphertext once
     * per batched ciphertext, spin takes its duration); 0: FHEPLAN_DEVICE_GBPS, else
     * 3000. */
    double device_gbps;
    /* 1: keep a timeline for rplan_vm_trace_json (scopes, transfers, bodies). */
    int trace;
    /* Replace the kind of every policy of the program: 0 keep, RPLAN_POLICY_TIERED_LRU,
     * RPLAN_POLICY_LOOKAHEAD (see rplan_policy_kind). */
    int policy_override;
    /* Prefetch: the host issues a request's transfers while earlier requests' bodies
     * still run, as far ahead as the budgets allow (0, the default): copies read by work
     * in flight cannot be evicted, and a decision that needs one waits for the oldest
     * body. Under the lookahead policy the VM also waits rather than evict a copy needed
     * sooner than one only older work in flight keeps, so prefetch keeps MIN's bytes.
     * prefetch_depth N > 0 bounds it further: the bodies in flight read at most N
     * distinct values that the next request does not require. serial = 1: no prefetch
     * (each request waits for earlier bodies). */
    unsigned prefetch_depth;
    int serial;
    void (*progress)(void *ctx, const rplan_vm_progress *p);
    void *progress_ctx;
} rplan_vm_opts;

/* ---- kernels --------------------------------------------------------------------- */

typedef enum rplan_arg_kind {
    RPLAN_ARG_VALUE = 0, RPLAN_ARG_INT, RPLAN_ARG_SIZE, RPLAN_ARG_DURATION
} rplan_arg_kind;

typedef struct rplan_arg {
    rplan_arg_kind kind;
    uint32_t value;     /* RPLAN_ARG_VALUE: index into rplan_kernel_call.values */
    uint64_t imm;       /* int, size in bytes (scaled), duration in ns */
} rplan_arg;

/* One body invocation: `run name(args)`. Every value argument is leased at `loc`
 * (plan bodies: the value's current device copy, else pinned, else host; request
 * bodies: the required location). The kernel must only enqueue work on `stream`
 * (a CUDA stream of loc's device, or an emulated/host queue) and return: the lease
 * is released right after, protected until that work completes. */
typedef struct rplan_kernel_call {
    rplan_vm *vm;
    fhr_manager *manager;
    fhr_backend *backend;
    const char *name;
    fhr_location loc;
    fhr_stream *stream;
    int device_memory;             /* 1: value pointers are real CUDA device memory */
    size_t nvalues;
    const fhr_value *const *values;        /* borrowed, read-only */
    const rplan_value_info *const *infos;  /* declaration of each value (nbytes scaled) */
    size_t nargs;
    const rplan_arg *args;
    void *scratch;                 /* VM-owned writable memory at loc */
    size_t scratch_nbytes;
    uint32_t line, col;            /* source position of the run statement */
} rplan_kernel_call;

typedef fhr_status (*rplan_kernel_fn)(void *ctx, const rplan_kernel_call *call,
                                      fhr_error *err);

/* Registers (or replaces) a body kernel. name is copied. The built-ins touch, verify,
 * spin and ckks.keyswitch are registered by rplan_vm_create and can be replaced. */
FHR_API fhr_status rplan_kernel_register(rplan_vm *vm, const char *name, rplan_kernel_fn fn,
                                         void *ctx, fhr_error *err);

/* ---- VM ------------------------------------------------------------------------ */

/* The program and backend must outlive the VM (neither is owned). The VM creates its
 * own manager over `backend` with the program's budgets (scaled and overridden). */
FHR_API fhr_status rplan_vm_create(const rplan_program *p, fhr_backend *backend,
                                   const rplan_vm_opts *opts, rplan_vm **out, fhr_error *err);
FHR_API void rplan_vm_destroy(rplan_vm *vm);
FHR_API fhr_manager *rplan_vm_manager(rplan_vm *vm);
/* The handle of value i of the program (valid after rplan_vm_run started it). */
FHR_API fhr_handle rplan_vm_handle(const rplan_vm *vm, size_t i);

/* ---- report ---------------------------------------------------------------------- */

#define RPLAN_MAX_PEAKS 8

typedef struct rplan_loc_peak {
    fhr_location loc;
    uint64_t peak_bytes;   /* highest used + reserved seen */
    int has_budget;
    uint64_t budget_bytes;
} rplan_loc_peak;

typedef struct rplan_stage_report {
    char name[160];            /* "inference/attention"; "(top level)" outside stages */
    uint64_t bytes[FHR_DIR_COUNT_];  /* copies per direction */
    uint64_t copies[FHR_DIR_COUNT_];
    uint64_t load_bytes, loads;      /* source loads (from the backing store) */
    uint64_t load_h2d_bytes;         /* of which onto a device */
    uint64_t evictions;              /* reclaim actions (plans and requests) */
    uint64_t plans, requests, bodies;
    double time_s;                   /* wall time, work on every stream included */
    double body_s;                   /* measured body execution time */
    double model_body_s;             /* body time predicted by the kernel model */
    size_t npeaks;
    rplan_loc_peak peaks[RPLAN_MAX_PEAKS];
    uint64_t checks, check_failures; /* verify kernels run / values that differed */
} rplan_stage_report;

typedef struct rplan_vm_report {
    int ok;
    int explain;
    char device[32];            /* "cuda", "emu", "model" */
    uint64_t scale;
    size_t nstages;
    rplan_stage_report *stages;
    rplan_stage_report total;
    double pinned_gbps;         /* measured or configured */
    double transfer_s;          /* (h2d + d2h + device loads) / pinned bandwidth */
    double lower_bound_s;       /* max(total body time, transfer_s) */
    double ratio;               /* total time / lower bound (0 when undefined) */
    double predicted_s;         /* max(modelled body time, transfer_s): perfect overlap */
    /* failure (ok == 0) */
    fhr_status status;
    char message[640];
    long instr;                 /* failing instruction, -1 if none */
    uint32_t line, col;
    fhr_phase phase;
    char scope[128];
    char *partial_json;         /* the failing plan's partial report (or NULL) */
} rplan_vm_report;

/* Runs the whole program once. Returns FHR_OK and a report when every statement
 * succeeded; on a runtime failure returns its status and still fills *report (ok 0,
 * with the failing source position and the partial report). *report is owned by the
 * caller (rplan_vm_report_free). A VM runs once. */
FHR_API fhr_status rplan_vm_run(rplan_vm *vm, rplan_vm_report **report, fhr_error *err);
FHR_API void rplan_vm_report_free(rplan_vm_report *r);
/* One JSON object (malloc'd; free()). */
FHR_API char *rplan_vm_report_json(const rplan_vm_report *r);
/* Chrome trace-event JSON of the run (opts.trace), one track per stream. */
FHR_API char *rplan_vm_trace_json(const rplan_vm *vm);

/* ---- synthetic data ------------------------------------------------------------- */

/* Word i (8 bytes, little endian) of the synthetic content with `seed`: byte k of a
 * value is byte k%8 of rplan_synth_word(seed, k/8). Used by init synth, source synth
 * and verify, on the host and on the GPU: this one definition is compiled by nvcc for
 * the CUDA kernels too (SplitMix64's finaliser over seed * C1 + (i + 1) * C2). */
#if defined(__CUDACC__)
#define RPLAN_SYNTH_INLINE static inline __host__ __device__
#else
#define RPLAN_SYNTH_INLINE static inline
#endif
RPLAN_SYNTH_INLINE uint64_t rplan_synth_word(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0xD1B54A32D192ED03ULL + (i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

#ifdef __cplusplus
}
#endif
#endif
