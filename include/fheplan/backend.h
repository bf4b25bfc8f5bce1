/* fheplan/backend.h — the one interface between the manager and memory, copies, streams
 * and events. Implementations: real CUDA (cuda_backend.c), the emulated device
 * (emu.c), the model backend that only accounts (model.c), and a fault-injecting
 * decorator (fault.c). Nothing above this layer includes cuda_runtime.h. */
#ifndef FHEPLAN_BACKEND_H
#define FHEPLAN_BACKEND_H

#include "fheplan/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fhr_backend fhr_backend;

/* Memory evidence sampled at snapshot time. Observations never drive decisions. */
typedef struct fhr_observation {
    int valid;                   /* 0: the backend has nothing to say for this location */
    uint64_t device_free_bytes;  /* cudaMemGetInfo (CUDA), emulated capacity left (emu) */
    uint64_t device_total_bytes;
    uint64_t pool_used_bytes;    /* bytes handed out by our pool for this location */
    uint64_t pool_reserved_bytes;/* bytes the pool holds from the system (arenas, cached blocks) */
    uint64_t pool_used_high_bytes;     /* the most pool_used_bytes has been (since creation) */
    uint64_t pool_reserved_high_bytes; /* the most pool_reserved_bytes has been */
    uint64_t pool_granule_bytes; /* the unit the pool grows by (CUDA: measured); 0: none */
    int nvml_valid;              /* 1: NVML (loaded with dlopen when present) answered */
    uint64_t nvml_used_bytes;    /* device memory in use by every process and context */
    uint64_t nvml_total_bytes;
} fhr_observation;

typedef void (*fhr_host_fn)(void *arg);

/* Every operation is thread-safe unless noted. Stream-taking operations are
 * asynchronous: they are ordered after all earlier work on that stream and return
 * before the work runs. A NULL stream is never passed by the manager. */
typedef struct fhr_backend_ops {
    const char *name; /* "cuda", "emu", "model", "fault" */
    /* Number of CUDA devices the process can use (emulated ones for emu/model). */
    int (*device_count)(fhr_backend *b);
    /* Allocates nbytes at loc. For CUDA locations the allocation is stream-ordered on s. */
    fhr_status (*alloc)(fhr_backend *b, fhr_location loc, size_t nbytes, fhr_stream *s,
                        void **out, fhr_error *err);
    /* Frees p after all work enqueued on s so far (s may be NULL: free now; the
     * caller guarantees no work uses p). */
    void (*free)(fhr_backend *b, fhr_location loc, void *p, size_t nbytes, fhr_stream *s);
    /* Copies n bytes from src (at sloc) to dst (at dloc), ordered on s. */
    fhr_status (*copy)(fhr_backend *b, void *dst, fhr_location dloc, const void *src,
                       fhr_location sloc, size_t n, fhr_stream *s, fhr_error *err);
    /* A stream whose work runs for loc (the device for CUDA; a host queue otherwise). */
    fhr_status (*stream_create)(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                fhr_error *err);
    /* Waits for the stream's work, then destroys it. */
    void (*stream_destroy)(fhr_backend *b, fhr_stream *s);
    /* Blocks until all work on s has completed. */
    fhr_status (*stream_sync)(fhr_backend *b, fhr_stream *s, fhr_error *err);
    fhr_status (*event_create)(fhr_backend *b, fhr_event **out, fhr_error *err);
    void (*event_destroy)(fhr_backend *b, fhr_event *e);
    /* Captures the work enqueued on s so far; a later record replaces the capture. */
    fhr_status (*event_record)(fhr_backend *b, fhr_event *e, fhr_stream *s, fhr_error *err);
    /* 1: captured work complete (or never recorded); 0: pending; negative: error. */
    int (*event_query)(fhr_backend *b, fhr_event *e);
    fhr_status (*event_sync)(fhr_backend *b, fhr_event *e, fhr_error *err);
    /* Makes later work on s wait for e's captured work (no host wait). */
    fhr_status (*stream_wait_event)(fhr_backend *b, fhr_stream *s, fhr_event *e,
                                    fhr_error *err);
    /* Runs fn(arg) on the host after earlier work on s; later work on s waits for it.
     * fn must not call back into the backend. */
    fhr_status (*launch_host)(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                              fhr_error *err);
    /* Samples memory evidence for loc. */
    void (*observe)(fhr_backend *b, fhr_location loc, fhr_observation *out);
    /* Identity of a stream for reports and traces (small, stable per backend). */
    uint64_t (*stream_id)(fhr_backend *b, fhr_stream *s);
    /* Frees the backend and everything it owns; all streams must be destroyed. */
    void (*destroy)(fhr_backend *b);
    /* A non-owning view of a native stream of loc (CUDA: a cudaStream_t; emu: a stream
     * this backend created). NULL: the backend has no native streams. */
    fhr_status (*stream_wrap)(fhr_backend *b, fhr_location loc, void *native,
                              fhr_stream **out, fhr_error *err);
    /* The native stream behind s and its device (views and own streams alike). */
    fhr_status (*stream_native)(fhr_backend *b, fhr_stream *s, void **native, int *device,
                                fhr_error *err);
    /* Optional (NULL, or FHR_E_UNSUPPORTED: not offered). An event whose records also
     * capture when their work completed, as event_create's otherwise; and the time from
     * the completion of `from`'s captured work to that of `to` (both recorded, complete,
     * on streams of one device), in seconds. Body times come from these rather than
     * from host functions, which stall a device stream for tens of microseconds. */
    fhr_status (*event_create_timed)(fhr_backend *b, fhr_event **out, fhr_error *err);
    fhr_status (*event_elapsed)(fhr_backend *b, fhr_event *from, fhr_event *to,
                                double *seconds, fhr_error *err);
    /* Optional (NULL, or 0 returned: the backend runs on the wall clock). A virtual
     * clock (the emulated device's, "emu:N,virtual"): 1, with *ns the host's simulated
     * time in nanoseconds, or inside a host function running on a stream the simulated
     * time it runs at (this one call may be made from a host function). */
    int (*clock)(fhr_backend *b, uint64_t *ns);
    /* Optional (NULL, or FHR_E_UNSUPPORTED: no virtual clock). Models ns of work on s:
     * later work on s starts ns later in simulated time; nothing runs. */
    fhr_status (*advance)(fhr_backend *b, fhr_stream *s, uint64_t ns, fhr_error *err);
} fhr_backend_ops;

struct fhr_backend {
    const fhr_backend_ops *ops;
    void *impl;
};

/* ---- constructors (each in its own file) ------------------------------------- */

/* Emulated device: device memory in host RAM, a worker thread per stream draining a
 * FIFO, events as real completion markers. ndev in 1..FHR_MAX_CUDA_DEVICES.
 * capacity_bytes per device (0: unlimited) bounds allocations like a real card. */
FHR_API fhr_status fhr_backend_emu_create(int ndev, uint64_t capacity_bytes,
                                          fhr_backend **out, fhr_error *err);
/* The emulated device on a virtual clock: deterministic simulated time instead of
 * wall-clock time (fhr_backend(3), "Virtual time"); what runs is the same. */
FHR_API fhr_status fhr_backend_emu_create_virtual(int ndev, uint64_t capacity_bytes,
                                                  fhr_backend **out, fhr_error *err);
/* Model backend: allocates and copies nothing, only hands out distinct fake
 * addresses; streams and events complete at once. Used by dry runs (`check`). */
FHR_API fhr_status fhr_backend_model_create(int ndev, fhr_backend **out, fhr_error *err);
/* Real CUDA backend; FHR_E_UNSUPPORTED when built without CUDA or no device is visible. */
FHR_API fhr_status fhr_backend_cuda_create(fhr_backend **out, fhr_error *err);
/* "auto" (CUDA when a device is visible, else emu:1), "cuda", "emu", "emu:N", "model",
 * "model:N"; "emu,virtual" and "emu:N,virtual" put the emulated device on its virtual
 * clock. NULL means the FHEPLAN_DEVICE environment variable, else "auto". */
FHR_API fhr_status fhr_backend_open(const char *spec, fhr_backend **out, fhr_error *err);
FHR_API void fhr_backend_destroy(fhr_backend *b);
/* The backend's clock in nanoseconds: its simulated time where it has a virtual clock
 * (*is_virtual 1), else CLOCK_MONOTONIC (*is_virtual 0). is_virtual may be NULL. */
FHR_API uint64_t fhr_backend_clock_ns(fhr_backend *b, int *is_virtual);

/* Fault injection: wraps inner (taking ownership) and fails the k-th (1-based) call of
 * the chosen kind with FHR_E_BACKEND; 0 disables that kind. Counters are readable so
 * a sweep can learn how many injection points a run has. */
typedef enum fhr_fault_kind {
    FHR_FAULT_ALLOC = 0,
    FHR_FAULT_COPY,
    FHR_FAULT_EVENT,
    FHR_FAULT_KINDS_
} fhr_fault_kind;
FHR_API fhr_status fhr_backend_fault_create(fhr_backend *inner, fhr_backend **out,
                                            fhr_error *err);
FHR_API void fhr_backend_fault_arm(fhr_backend *fault, fhr_fault_kind kind, uint64_t k);
FHR_API uint64_t fhr_backend_fault_count(fhr_backend *fault, fhr_fault_kind kind);

/* Thin public wrappers so embedding code never touches the ops table. */
FHR_API fhr_status fhr_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                     fhr_error *err);
FHR_API void fhr_stream_destroy(fhr_backend *b, fhr_stream *s);
FHR_API fhr_status fhr_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err);
FHR_API fhr_status fhr_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                   fhr_error *err);

/* Foreign streams (see fheplan/cuda.h for the typed CUDA forms). fhr_stream_wrap makes a
 * non-owning view of a stream the engine owns: work fheplan orders on the view (copies,
 * consumer events, waits) is enqueued on the native stream itself. The engine keeps the
 * native stream alive until the view is destroyed; fhr_stream_destroy on a view frees
 * the view only (no wait, the native stream untouched). On the CUDA backend `native`
 * is a cudaStream_t of device loc.index (or the per-thread default stream: see
 * fhr_stream_wrap_cuda); on the emulated device it is a stream that backend created
 * (fhr_stream_create), which stands in for an engine's own stream. FHR_E_UNSUPPORTED on
 * backends without native streams (model). */
FHR_API fhr_status fhr_stream_wrap(fhr_backend *b, fhr_location loc, void *native,
                                   fhr_stream **out, fhr_error *err);
/* The native stream of any stream of b (a view's is the wrapped one) and its device
 * index (device may be NULL). */
FHR_API fhr_status fhr_stream_native(fhr_backend *b, fhr_stream *s, void **native,
                                     int *device, fhr_error *err);

#ifdef __cplusplus
}
#endif
#endif
