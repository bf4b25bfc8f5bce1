/* cuda/staging_pipeline.h — the shape of pageable staging (threads, chunk sizes, from the
 * environment), the chunk plan of one copy and the pipeline's order; no CUDA. Internal. */
#ifndef FHEPLAN_STAGING_PIPELINE_H
#define FHEPLAN_STAGING_PIPELINE_H

#include "fheplan/backend.h"

#include <stddef.h>

#define STAGING_ALIGN ((size_t)4096)           /* chunk sizes are multiples of a page */
#define STAGING_MIN_CHUNK ((size_t)256 << 10)  /* default smallest chunk */
#define STAGING_MAX_CHUNK ((size_t)4 << 20)    /* default largest chunk: the slot size */
#define STAGING_DEFAULT_MAX_THREADS 16         /* the core count is capped at this */
#define STAGING_THREADS_LIMIT 64
#define STAGING_CHUNK_LIMIT ((size_t)1 << 30)
#define STAGING_MAX_SLOTS (STAGING_THREADS_LIMIT + 2)

/* What a backend stages with: host copy threads and the chunk range. */
typedef struct staging_shape {
    int threads;
    size_t min_chunk, max_chunk; /* equal when FHEPLAN_STAGING_CHUNK fixes the chunk */
} staging_shape;

/* The cores this process may run on (its affinity mask), at least 1. */
int staging_cores(void);
/* The shape from the values of FHEPLAN_COPY_THREADS and FHEPLAN_STAGING_CHUNK (NULL or
 * "": the default). Threads default to cores, capped at STAGING_DEFAULT_MAX_THREADS;
 * a chunk is a byte count with an optional K, M or G suffix (KiB, MiB, GiB), a multiple
 * of 4 KiB from 4 KiB to 1 GiB. A bad value is FHR_E_INVALID naming the variable. */
fhr_status staging_shape_parse(const char *threads, const char *chunk, int cores,
                               staging_shape *out, fhr_error *err);

/* The plan of one copy of n bytes (n >= 1). */
typedef struct staging_plan {
    size_t n;
    size_t chunk;  /* bytes per chunk; the last one may be shorter */
    size_t chunks; /* ceil(n / chunk) */
    int slots;     /* staging slots the copy cycles through: min(chunks, threads + 2) */
    int lag;       /* how many chunks behind the first stage a slot is recycled */
    int inline_host; /* one chunk: the caller copies it itself, no hand-off */
} staging_plan;

/* Chunks: about two per thread, so that every thread has one and the DMA of the first
 * overlaps the copy of the next, clamped to [min_chunk, max_chunk] and rounded up to a
 * page. to_device: the host stage comes first (fill, then DMA) and a slot is recycled
 * one chunk behind; otherwise (DMA, then drain) `threads` chunks behind. */
void staging_plan_make(size_t n, const staging_shape *sh, int to_device, staging_plan *p);
/* Offset and length of chunk i. */
void staging_chunk(const staging_plan *p, size_t i, size_t *off, size_t *len);

/* The two stages of a chunk. start_a(i) runs (or starts) the first stage of chunk i in
 * slot i % slots, wait_a waits for it; start_b and wait_b likewise for the second.
 * quiesce waits for every host task started and not yet waited for (on failure). */
typedef struct staging_ops {
    fhr_status (*start_a)(void *ctx, size_t i, int slot, fhr_error *err);
    fhr_status (*wait_a)(void *ctx, size_t i, int slot, fhr_error *err);
    fhr_status (*start_b)(void *ctx, size_t i, int slot, fhr_error *err);
    fhr_status (*wait_b)(void *ctx, size_t i, int slot, fhr_error *err);
    void (*quiesce)(void *ctx);
} staging_ops;

/* Runs the pipeline: a(i) before b(i); slot s is used by chunk i + slots only after
 * b(i) was waited for; the first `slots` a-stages start at once. wait_tail: wait for the
 * b-stages of the last chunks too (otherwise the caller leaves them in flight). The
 * first failure stops it: quiesce runs and the error is returned. */
fhr_status staging_run(const staging_plan *p, int wait_tail, const staging_ops *ops, void *ctx,
                       fhr_error *err);

#endif
