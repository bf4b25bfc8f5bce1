/* cuda/staging_pipeline.h — the shape of pageable staging (threads, chunk sizes, from the
 * environment), the chunk plan of one copy and the pipeline's order; no CUDA. Internal. */
#ifndef FHEPLAN_STAGING_PIPELINE_H
#define FHEPLAN_STAGING_PIPELINE_H

#include "cuda/copy_threads.h"
#include "fheplan/backend.h"

#include <stddef.h>

#define STAGING_ALIGN ((size_t)4096)           /* chunk sizes are multiples of a page */
#define STAGING_MIN_CHUNK ((size_t)256 << 10)  /* default smallest steady chunk */
#define STAGING_MAX_CHUNK ((size_t)8 << 20)    /* default largest chunk: the slot size
                                                  (bench/README.md: 8 MiB with spinning
                                                  threads moved 256 MiB pageable->cuda at
                                                  0.93-0.94 of the pinned link on the H200
                                                  hosts with the most memory bandwidth) */
#define STAGING_FIRST_CHUNK ((size_t)64 << 10) /* the ramp's first chunk */
#define STAGING_THREAD_UNIT ((size_t)1 << 20)  /* a copy of n bytes keeps log2(n / this) busy */
#define STAGING_DEFAULT_MAX_THREADS 8          /* the core count is capped at this */
#define STAGING_THREADS_LIMIT 64
#define STAGING_CHUNK_LIMIT ((size_t)1 << 30)
#define STAGING_DEPTH_LIMIT 8
#define STAGING_MAX_SLOTS (STAGING_THREADS_LIMIT + 1 + STAGING_DEPTH_LIMIT)
/* Default FHEPLAN_STAGING_DIRECT: pageable copies below it take CUDA's own pageable path.
 * On the H200 CUDA's path beat the pipeline from 256 KiB to 4 MiB (1 MiB: 11.3 against
 * 4.8 GB/s; 4 MiB: 13.0 against 9.2) and lost from 64 MiB up (6.6-8.9 against 40 at 1 GiB). */
#define STAGING_DIRECT_BELOW ((size_t)8 << 20)
#define STAGING_DIRECT_LIMIT ((size_t)1 << 40)
/* FHEPLAN_STAGING_MEMCPY: how slots are filled and drained. `libc` with the C library's
 * memcpy, `stream` with copy_stream (non-temporal stores, cuda/host_copy.h), `auto` (the
 * default) with non-temporal stores for the fills of copies towards a device below
 * STAGING_AUTO_STREAM_BELOW, the C library's memcpy otherwise (staging_stream_copy). On
 * the H200 host (bench/transfer --small-variants, side by side, against CUDA's own copy)
 * non-temporal fills moved 1 MiB pageable->cuda at 1.70x CUDA's copy against 1.16x with
 * memcpy, 4 MiB at 2.51x against 1.49x and 8 MiB at 2.13x against 1.05x; 16 MiB at 2.34x
 * against 1.15x and 64 MiB at 45.6 against 37.6 GB/s (two runs of one lease); at 256
 * MiB they fell to 0.60-0.69 of the pinned link against 0.87-0.94 on three hosts. Side
 * by side, non-temporal drains lost to memcpy at 64 KiB to 8 MiB (1 MiB: 1.78x against
 * 2.14x CUDA's copy). */
#define STAGING_MEMCPY_LIBC 0
#define STAGING_MEMCPY_STREAM 1
#define STAGING_MEMCPY_AUTO 2
#define STAGING_DEFAULT_STREAM STAGING_MEMCPY_AUTO
#define STAGING_AUTO_STREAM_BELOW ((size_t)128 << 20)
/* Default FHEPLAN_STAGING_DEPTH: DMAs a host-to-device copy keeps queued behind the one
 * running before it waits for the oldest (1: the next one only). */
#define STAGING_DEFAULT_DEPTH 1
/* The paths of a copy below FHEPLAN_STAGING_DIRECT (FHEPLAN_STAGING_SMALL, per direction):
 * `direct` is CUDA's own pageable copy; `caller` has the calling thread stage it alone
 * through STAGING_SMALL_SLOTS slots, each chunk's DMA overlapping the host copy of the
 * next; `parallel` cuts it into a few chunks of STAGING_PARALLEL_CHUNK at most, each split
 * over the copy threads and the caller (staging_parallel_plan_make). */
#define STAGING_SMALL_DIRECT 0
#define STAGING_SMALL_CALLER 1
#define STAGING_SMALL_PARALLEL 2
/* `auto`, the default, picks one of them by size and direction. Towards the device: the
 * caller up to STAGING_AUTO_CALLER_MAX_TO, CUDA's own below STAGING_AUTO_DIRECT_BELOW,
 * parallel from it. From the device: the caller below STAGING_AUTO_CALLER_BELOW_FROM,
 * parallel from it. On the H200 host (bench/transfer --small-variants, against CUDA's own
 * copy on the same stream, with non-temporal fills) these were the paths that beat CUDA's
 * own pageable copy at each size, or (towards the device above 64 KiB, where nothing of
 * ours did) CUDA's own call. CUDA's pageable copy towards the device takes 26 us at 64 KiB
 * and 17 us at 96 KiB: the caller's one chunk ran at 1.54-1.68x it at 64 KiB, at
 * 0.90-0.93x at 96 KiB, 0.92-1.00x at 128 KiB and 0.93-0.98x at 192 KiB, CUDA's own call at
 * 0.93-1.00x (bench/README.md). From the device the caller's one chunk ran at 1.06-1.31x
 * CUDA's copy at 96-192 KiB (CUDA's own call behind our bookkeeping: 0.97-0.99x) and
 * 1.34-1.39x at 256 KiB (parallel chunks: 1.04-1.21x, once 0.98x), two chunks at 384 KiB
 * 1.17-1.37x; at 512 KiB parallel chunks won in three of four runs (1.35-1.69x against
 * 1.21-1.49x). At 256 KiB towards the device parallel chunks ran at 0.86-1.30x over six
 * tables, CUDA's own call at 0.97-1.00x of itself after the stream wait it needs (below),
 * so CUDA's call is taken below 384 KiB, where parallel chunks ran at 0.92-1.25x. Towards
 * the device CUDA's call reads its source before the stream's earlier work has run
 * (bench/transfer --caller-probe), so it is taken after a wait for the stream
 * (cuda/cuda_staging.c); no staged copy of ours beat it there: one chunk pays its fill
 * and then a DMA round trip of 10-17 us, which CUDA's driver overlaps. */
#define STAGING_SMALL_AUTO 3
#define STAGING_AUTO_CALLER_MAX_TO ((size_t)64 << 10)
#define STAGING_AUTO_CALLER_BELOW_FROM ((size_t)512 << 10)
#define STAGING_AUTO_DIRECT_BELOW ((size_t)384 << 10)
#define STAGING_DEFAULT_SMALL_TO STAGING_SMALL_AUTO   /* towards the device */
#define STAGING_DEFAULT_SMALL_FROM STAGING_SMALL_AUTO /* from the device */
#define STAGING_PARALLEL_CHUNK ((size_t)1 << 20)     /* the largest chunk of a parallel copy */
#define STAGING_PARALLEL_MIN_CHUNK ((size_t)256 << 10) /* ... and its smallest, but the last */
/* Default FHEPLAN_COPY_SPIN, in microseconds: how long an idle copy thread polls for work,
 * and a caller for its copy's last pieces, before sleeping (copy_pool_set_spin). The
 * parallel small copies need it (on the H200 host, 1 MiB pageable->cuda at 1.11x CUDA's
 * own copy with it, 1.01x without); at 256 MiB it helped on some hosts and not others
 * (bench/README.md). */
#define STAGING_DEFAULT_SPIN_US 50
#define STAGING_SPIN_LIMIT_US 100000
#define STAGING_SMALL_SLOTS 3                 /* slots of a caller-staged copy */
#define STAGING_SMALL_CHUNK ((size_t)1 << 20) /* its steady chunk, after a ramp from: */
/* the caller's first chunk: a copy up to it is one chunk and one DMA. On the H200 host one
 * DMA of 128 KiB beat two of 64 KiB by 1.13-1.23x in both directions (bench/transfer
 * --small-variants, `caller 128K` against `small caller`), and fixed 256 KiB chunks beat
 * the ramp from 64 KiB at 128 KiB to 1 MiB. */
#define STAGING_SMALL_FIRST_CHUNK ((size_t)256 << 10)
/* Default FHEPLAN_STAGING_FILL: 0 (`whole`) has each copy thread fill or drain a whole
 * chunk, 1 (`split`) has every thread and the caller copy a contiguous piece of the oldest
 * chunks in order, so that each chunk is complete as early as possible. On the H200 host
 * (bench/transfer --variants, side by side) split moved 256 MiB pageable->cuda at 0.902 of
 * the pinned link against 0.793 whole, cuda->pageable 0.964 against 0.871, and 1 GiB at
 * 0.937 and 0.971 against 0.881 and 0.916. */
#define STAGING_DEFAULT_SPLIT 1
#define STAGING_SPLIT_MIN_PIECE ((size_t)64 << 10) /* no piece of a split chunk is smaller,
                                                      but the last */

/* What a backend stages with: host copy threads and the chunk range. */
typedef struct staging_shape {
    int threads;
    size_t min_chunk, max_chunk; /* equal when FHEPLAN_STAGING_CHUNK fixes the chunk */
    int fixed_threads;           /* 1 (the default, and FHEPLAN_COPY_THREADS): every copy
                                    keeps them all busy; 0: a count grows with the size */
    size_t direct_below;         /* FHEPLAN_STAGING_DIRECT: smaller copies skip staging */
    int stream_copy;             /* FHEPLAN_STAGING_MEMCPY: STAGING_MEMCPY_* */
    int depth;                   /* FHEPLAN_STAGING_DEPTH (below 1: 1) */
    int small[2];                /* FHEPLAN_STAGING_SMALL: STAGING_SMALL_*, [1] towards
                                    the device, [0] from it */
    long spin_us;                /* FHEPLAN_COPY_SPIN */
    int split_fill;              /* FHEPLAN_STAGING_FILL: 1 for `split` */
} staging_shape;

/* A byte count with an optional K, M, G or T suffix (KiB ... TiB, also written so); 0 on
 * success, -1 when v is not one or is outside [lo, hi]. */
int staging_parse_bytes(const char *v, unsigned long long lo, unsigned long long hi,
                        unsigned long long *out);

/* The cores this process may run on (its affinity mask), at least 1. */
int staging_cores(void);
/* The shape from the values of FHEPLAN_COPY_THREADS and FHEPLAN_STAGING_CHUNK (NULL or
 * "": the default). Threads default to cores, capped at STAGING_DEFAULT_MAX_THREADS, and
 * every staged copy keeps them all busy (fixed_threads: on an H200 host, 8 threads on every
 * copy moved 1 GiB pageable->cuda at 0.90 of the pinned link, against 0.79 for a count that
 * grows with the copy's size up to 16: bench/README.md);
 * a chunk is a byte count with an optional K, M or G suffix (KiB, MiB, GiB), a multiple
 * of 4 KiB from 4 KiB to 1 GiB. A bad value is FHR_E_INVALID naming the variable. */
fhr_status staging_shape_parse(const char *threads, const char *chunk, int cores,
                               staging_shape *out, fhr_error *err);

/* Sets sh->direct_below from the value of FHEPLAN_STAGING_DIRECT (NULL or "": keep
 * STAGING_DIRECT_BELOW, which staging_shape_parse sets): a byte count with an optional K, M
 * or G suffix, 0 to 1T; 0 stages every copy. A bad value is FHR_E_INVALID naming the
 * variable, sh untouched. */
fhr_status staging_direct_parse(const char *v, staging_shape *sh, fhr_error *err);
/* The path of one pageable copy of n bytes: 1 for the driver's own pageable copy, 0 for
 * the staging pipeline. A function of n and the shape alone, so the same copy always
 * takes the same path; either path moves the same bytes. */
int staging_direct(size_t n, const staging_shape *sh);

/* Sets sh->stream_copy from the value of FHEPLAN_STAGING_MEMCPY (NULL or "": keep
 * STAGING_DEFAULT_STREAM, which staging_shape_parse sets): `auto`, `libc` (the C
 * library's memcpy) or `stream` (non-temporal stores). A bad value is FHR_E_INVALID naming
 * the variable, sh untouched. */
fhr_status staging_memcpy_parse(const char *v, staging_shape *sh, fhr_error *err);
/* Whether the host stages of a pageable copy of n bytes use non-temporal stores: always
 * (`stream`), never (`libc`), or (`auto`) for the fills of a copy towards a device below
 * STAGING_AUTO_STREAM_BELOW. A function of n, the direction and the shape alone. */
int staging_stream_copy(size_t n, const staging_shape *sh, int to_device);

/* Sets sh->depth from the value of FHEPLAN_STAGING_DEPTH (NULL or "": keep
 * STAGING_DEFAULT_DEPTH, which staging_shape_parse sets): a whole number from 1 to
 * STAGING_DEPTH_LIMIT. A bad value is FHR_E_INVALID naming the variable, sh untouched. */
fhr_status staging_depth_parse(const char *v, staging_shape *sh, fhr_error *err);

/* Sets sh->small from the value of FHEPLAN_STAGING_SMALL (NULL or "": keep
 * STAGING_DEFAULT_SMALL_TO and _FROM, which staging_shape_parse sets): one path for both
 * directions (`auto`, `direct`, `caller` or `parallel`), or two separated by a comma,
 * towards the device first ("parallel,caller"). A bad value is FHR_E_INVALID naming the
 * variable, sh untouched. */
fhr_status staging_small_parse(const char *v, staging_shape *sh, fhr_error *err);

/* Sets sh->spin_us from the value of FHEPLAN_COPY_SPIN (NULL or "": keep
 * STAGING_DEFAULT_SPIN_US): whole microseconds, 0 to STAGING_SPIN_LIMIT_US. A bad value is
 * FHR_E_INVALID naming the variable, sh untouched. */
fhr_status staging_spin_parse(const char *v, staging_shape *sh, fhr_error *err);

/* Sets sh->split_fill from the value of FHEPLAN_STAGING_FILL (NULL or "": keep
 * STAGING_DEFAULT_SPLIT, which staging_shape_parse sets): `split` or `whole`. A bad value
 * is FHR_E_INVALID naming the variable, sh untouched. */
fhr_status staging_fill_parse(const char *v, staging_shape *sh, fhr_error *err);

/* The small-copy path of one pageable copy of n bytes in that direction: -1 when it is
 * at or above the direct threshold (the staging pipeline), else the STAGING_SMALL_DIRECT,
 * _CALLER or _PARALLEL that sh->small names for the direction (`auto` resolved by n). A
 * function of n, the direction and the shape alone. */
int staging_small(size_t n, const staging_shape *sh, int to_device);

/* The plan of one copy of n bytes (n >= 1): `ramp` chunks of first, 2 first, 4 first, ...
 * (each below `chunk`), then chunks of `chunk`, the last one possibly shorter. */
typedef struct staging_plan {
    size_t n;
    size_t chunk;  /* the steady chunk */
    size_t first;  /* the first chunk: the ramp's start with a ramp, else chunk */
    size_t ramp;   /* chunks before the steady ones (0: none) */
    size_t chunks;
    int threads;   /* copy threads the copy keeps busy */
    int slots;     /* staging slots the copy cycles through: min(chunks, threads + 1 + depth) */
    int depth;     /* the shape's DMA depth (at least 1) */
    int lag;       /* how many chunks behind the first stage a slot is recycled */
    int inline_host; /* one chunk: the caller copies it itself, no hand-off */
    size_t own;      /* the chunk whose host stage the caller does itself, not a thread:
                        the first towards the device, the last from it; SIZE_MAX when
                        split (the caller helps with every chunk it waits for) */
    int caller_all;  /* every host stage is the caller's (a caller-staged small copy) */
    int split;       /* host stages cut into pieces over the threads and the caller */
} staging_plan;

/* Threads: the shape's when fixed, else floor(log2(n / STAGING_THREAD_UNIT)) (at least 1,
 * at most the shape's): waking threads costs more than it saves on a small copy. The
 * steady chunk: about two per thread, so that every thread has one and the DMA of one
 * overlaps the copy of the next, clamped to [min_chunk, max_chunk] and rounded up to a
 * page. A copy longer than one chunk with the chunk not fixed starts with a geometric ramp
 * from STAGING_FIRST_CHUNK, doubling up to the steady chunk, so that the first DMA starts
 * after one small host copy. to_device: the host stage comes first (fill, then DMA), a
 * slot is recycled `depth` chunks behind (so that up to depth + 1 DMAs are queued), and the
 * caller fills the first chunk itself while the threads fill the next ones; otherwise (DMA,
 * then drain) slots are recycled `threads` chunks behind and the caller drains the last
 * chunk itself. */
void staging_plan_make(size_t n, const staging_shape *sh, int to_device, staging_plan *p);
/* (With sh->split_fill: the same chunks, threads, slots and lag, split set, no own chunk:
 * every host stage is cut into pieces, staging_pieces over threads + 1.) */

/* The plan of a caller-staged copy of n bytes (n >= 1, below the direct threshold): a ramp
 * of 256 KiB (STAGING_SMALL_FIRST_CHUNK), 512 KiB, ... up to a steady chunk of
 * STAGING_SMALL_CHUNK (the slot size, sh->max_chunk, when smaller; a ramp only while below
 * it, and none when the chunk is fixed), at most STAGING_SMALL_SLOTS slots, no threads,
 * caller_all. */
void staging_small_plan_make(size_t n, const staging_shape *sh, staging_plan *p);

/* The plan of a parallel small copy of n bytes (n >= 1): no ramp, chunks of about n / 2,
 * whole pages, at least STAGING_PARALLEL_MIN_CHUNK (one chunk below twice that) and at most
 * STAGING_PARALLEL_CHUNK and the slot size; every chunk's host stage split over the
 * shape's threads and the caller; slots, lag and depth as staging_plan_make. Run by
 * staging_run. */
void staging_parallel_plan_make(size_t n, const staging_shape *sh, int to_device,
                                staging_plan *p);

/* The plan of a copy of n bytes on `path` (staging_small's answer): caller-staged,
 * parallel, or (-1, or STAGING_SMALL_DIRECT where the pipeline stands in for CUDA's own
 * copy) the pipeline's. */
void staging_plan_for(int path, size_t n, const staging_shape *sh, int to_device,
                      staging_plan *p);

/* Offset and length of chunk i. */
void staging_chunk(const staging_plan *p, size_t i, size_t *off, size_t *len);

/* A split host stage of len bytes (len >= 1) over `parts` workers (the threads and the
 * caller): the piece size, a whole number of pages of about len / parts and at least
 * STAGING_SPLIT_MIN_PIECE; *pieces (at most parts) pieces of it tile [0, len) in order,
 * the last one possibly shorter. */
size_t staging_pieces(size_t len, int parts, int *pieces);

/* Starts the host stage of chunk i, len bytes from src to dst by fn, in a slot whose host
 * task is job (whole chunks) or split (its pieces): the caller copies it itself when the
 * plan says so (every chunk of a caller-staged copy, or the plan's own chunk), a split plan
 * cuts it into pieces over the threads and the caller, else one thread takes it. */
void staging_host_start(const staging_plan *p, copy_pool *cp, copy_job *job, copy_split *split,
                        size_t i, copy_fn fn, void *dst, const void *src, size_t len);
/* Returns once that slot's host stage is done (the caller helps with a split one, whose
 * pieces exist); at once for a caller-staged copy. */
void staging_host_join(const staging_plan *p, copy_pool *cp, copy_job *job, copy_split *split);

/* The two stages of a chunk. start_a(i) runs (or starts) the first stage of chunk i in
 * slot i % slots, wait_a waits for it; start_b and wait_b likewise for the second. A
 * start that fails leaves nothing of its stage running. quiesce waits for every host task
 * started and not yet waited for (on failure, after the drain). */
typedef struct staging_ops {
    fhr_status (*start_a)(void *ctx, size_t i, int slot, fhr_error *err);
    fhr_status (*wait_a)(void *ctx, size_t i, int slot, fhr_error *err);
    fhr_status (*start_b)(void *ctx, size_t i, int slot, fhr_error *err);
    fhr_status (*wait_b)(void *ctx, size_t i, int slot, fhr_error *err);
    void (*quiesce)(void *ctx);
} staging_ops;

/* Runs the pipeline: a(i) before b(i); slot s is used by chunk i + slots only after
 * b(i) was waited for; the first `slots` a-stages start at once, the plan's own chunk
 * last among them (the caller does it while the threads do the others). wait_tail: wait for the
 * b-stages of the last chunks too (otherwise the caller leaves them in flight). The
 * first failure stops it: every stage started and not yet waited for is waited for (the
 * drain; its own errors are ignored), quiesce runs, and the first error is returned. */
fhr_status staging_run(const staging_plan *p, int wait_tail, const staging_ops *ops, void *ctx,
                       fhr_error *err);

/* Runs a caller-staged copy (staging_small_plan_make), every host stage by the caller, a
 * slot reused only after its chunk's DMA was waited for. Towards the device (a: the fill,
 * b: its DMA): fill chunk i, start its DMA at once, and before the fill of chunk i + slots
 * wait for the DMA of chunk i, so the fill of the next chunks overlaps the DMA of the
 * earlier ones; the last DMAs are left in flight. From the device (a: the DMA, b: the
 * drain): slots - 1 DMAs started ahead; for each chunk wait for its DMA, start the DMA
 * slots - 1 chunks on (into the slot drained last), then drain it. The first failure stops
 * it, every DMA started and not yet waited for is waited for, and the first error is
 * returned. */
fhr_status staging_small_run(const staging_plan *p, int to_device, const staging_ops *ops,
                             void *ctx, fhr_error *err);

#endif
