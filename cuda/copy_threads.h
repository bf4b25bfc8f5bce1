/* cuda/copy_threads.h — the host copy-thread pool of the CUDA backend's staging: plain
 * pthreads, no CUDA, so it runs (and is tested) in every build. Internal. */
#ifndef FHEPLAN_COPY_THREADS_H
#define FHEPLAN_COPY_THREADS_H

#include "fheplan/backend.h"

#include <stddef.h>

#define COPY_MAX_THREADS 64
#define COPY_MAX_PIECES (COPY_MAX_THREADS + 1) /* a split job: every thread and the caller */

/* What a task does with its bytes: memcpy (copy_plain), a streaming memcpy (copy_stream)
 * or anything else of that shape (the pinned pool faults pages in with src NULL). */
typedef void (*copy_fn)(void *dst, const void *src, size_t n);
/* memcpy with the copy_fn signature. */
void copy_plain(void *dst, const void *src, size_t n);

/* One queued memcpy. `pending` is the counter of whoever waits for it (guarded by the
 * pool's mutex). */
typedef struct copy_task {
    copy_fn fn;
    void *dst;
    const void *src;
    size_t n;
    _Atomic int *pending;
    struct copy_task *next;
} copy_task;

/* A memcpy handed whole to one pool thread (copy_pool_submit), waited for with
 * copy_pool_wait. The caller owns the storage and keeps it alive until the wait. */
typedef struct copy_job {
    copy_task task;
    _Atomic int pending; /* 1 from submit until a thread has finished the memcpy */
} copy_job;

/* A host copy cut into contiguous pieces that any pool thread, or the caller waiting for
 * it, may take (copy_pool_submit_split, copy_pool_wait_split). The caller
 * owns the storage and keeps it alive until the wait. */
typedef struct copy_split {
    copy_task task[COPY_MAX_PIECES];
    int pieces;  /* of the last submission */
    _Atomic int pending; /* pieces not finished yet (changed under the pool's mutex; read
                            without it by a spinning waiter) */
} copy_split;

/* A persistent pool of threads doing host memcpys. Callable from any thread, including
 * CUDA host functions (it calls no CUDA). */
typedef struct copy_pool copy_pool;
fhr_status copy_pool_create(int nthreads, copy_pool **out, fhr_error *err);
/* One large memcpy cut into page-aligned slices over the threads; returns when done. */
void copy_pool_memcpy(copy_pool *cp, void *dst, const void *src, size_t n);
/* fn over n bytes cut into slices of whole `granule`s (a power of two; the last slice
 * takes the rest), one per thread, the caller doing the first; src may be NULL (then
 * every slice gets NULL). Returns when all are done. */
void copy_pool_run(copy_pool *cp, copy_fn fn, void *dst, const void *src, size_t n,
                   size_t granule);
/* Queues j's memcpy of n bytes for one thread and returns at once. */
void copy_pool_submit(copy_pool *cp, copy_job *j, void *dst, const void *src, size_t n);
/* The same with fn instead of memcpy. */
void copy_pool_submit_fn(copy_pool *cp, copy_job *j, copy_fn fn, void *dst, const void *src,
                         size_t n);
/* Returns once j (submitted, or never submitted: pending 0) is done. */
void copy_pool_wait(copy_pool *cp, copy_job *j);
/* Queues fn over n bytes as pieces of `piece` bytes (the last one the rest; at most
 * COPY_MAX_PIECES of them), in order, and returns at once; j must be done (or never
 * submitted). n 0: j is done at once. */
void copy_pool_submit_split(copy_pool *cp, copy_split *j, copy_fn fn, void *dst,
                            const void *src, size_t n, size_t piece);
/* Returns once every piece of j (submitted, or never: pending 0) is done, running itself
 * each piece of j no thread has taken yet, in queue order. */
void copy_pool_wait_split(copy_pool *cp, copy_split *j);
int copy_pool_threads(const copy_pool *cp);
/* How long (ns; 0, the default: not at all) a pool thread with nothing queued polls the
 * queue before it sleeps, and a waiter polls for the last pieces of its copy before it
 * sleeps: a copy that follows within that time finds the threads awake instead of paying
 * their wake-up. Any thread, any time. */
void copy_pool_set_spin(copy_pool *cp, long spin_ns);
void copy_pool_destroy(copy_pool *cp);

#endif
