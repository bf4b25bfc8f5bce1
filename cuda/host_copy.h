/* cuda/host_copy.h — the host-side primitives of copies and pinning that need no CUDA:
 * a streaming (non-temporal) memcpy, the pinned pool's shape from the environment, and
 * the mapping of an arena before it is page-locked (huge pages, pages faulted in ahead,
 * by the copy threads or not). Internal; tested in every build. */
#ifndef FHEPLAN_HOST_COPY_H
#define FHEPLAN_HOST_COPY_H

#include "fheplan/backend.h"
#include "cuda/copy_threads.h"

#include <stddef.h>

/* memcpy with non-temporal stores for the aligned body (AVX2 where the CPU has it, else
 * SSE2; plain memcpy on other architectures): the destination's lines are not read
 * first and do not fill the caches. Any size and alignment; the stores are fenced
 * before it returns. */
void copy_stream(void *dst, const void *src, size_t n);

/* ---- the pinned pool's shape --------------------------------------------------------- */

#define PIN_ARENA_DEFAULT ((size_t)256 << 20)
#define PIN_ARENA_MIN ((size_t)2 << 20)
#define PIN_ARENA_LIMIT ((size_t)64 << 30)
#define PIN_HUGE ((size_t)2 << 20) /* a transparent huge page on x86-64 */
#define PIN_SMALL_PAGE ((size_t)4096)

typedef enum pin_prefault {
    PIN_PREFAULT_NONE,     /* page-locking faults the pages in, one thread */
    PIN_PREFAULT_POPULATE, /* MADV_POPULATE_WRITE over the arena, one thread */
    PIN_PREFAULT_THREADS   /* the copy threads populate slices of it at once */
} pin_prefault;

/* Defaults: one line each. */
#define PIN_DEFAULT_PREFAULT PIN_PREFAULT_THREADS
#define PIN_DEFAULT_HUGEPAGE 1
#define PIN_DEFAULT_AHEAD 0

typedef struct pin_shape {
    int hostalloc;        /* FHEPLAN_PINNED_HOSTALLOC=1: arenas from cudaHostAlloc */
    pin_prefault prefault; /* FHEPLAN_PINNED_PREFAULT: none, populate, threads */
    int hugepage;         /* FHEPLAN_PINNED_HUGEPAGE: 1 asks for transparent huge pages */
    size_t arena;         /* FHEPLAN_PINNED_ARENA: a shared arena's size */
    int ahead;            /* FHEPLAN_PINNED_AHEAD: 1 pins the next arena ahead */
} pin_shape;

/* The shape from the four variables' values (NULL or "": the default). HOSTALLOC and
 * HUGEPAGE are 0 or 1; PREFAULT is none, populate or threads; ARENA is a byte count with
 * an optional K, M or G suffix (KiB, MiB, GiB), a multiple of 2 MiB from 2 MiB to 64 GiB.
 * A bad value is FHR_E_INVALID naming the variable and the value, out untouched. */
fhr_status pin_shape_parse(const char *hostalloc, const char *prefault, const char *hugepage,
                           const char *arena, pin_shape *out, fhr_error *err);

/* Sets out->ahead from the value of FHEPLAN_PINNED_AHEAD (NULL or "": PIN_DEFAULT_AHEAD,
 * which pin_shape_parse sets): 0 or 1. 1: after each growth a thread pins one more arena
 * of the same size for the next one (held, and counted as reserved, until then). A bad
 * value is FHR_E_INVALID naming the variable, out untouched. */
fhr_status pin_ahead_parse(const char *v, pin_shape *out, fhr_error *err);

/* The bytes of the arena that a request of nbytes adds when nothing has room: the shared
 * arena size, or, for a request above half of it, an arena of its own rounded up to a
 * huge page (with hugepage) or a page. */
size_t pin_arena_bytes(size_t nbytes, const pin_shape *sh);

/* Maps len bytes (a multiple of a page) of private anonymous memory for an arena, aligned
 * to PIN_HUGE, advised as huge pages when sh->hugepage, and faulted in as sh->prefault says
 * (PIN_PREFAULT_THREADS uses cp, or this thread when cp is NULL). NULL when the mapping
 * fails. The memory reads as zeros. Release with pin_unmap. */
void *pin_map(size_t len, const pin_shape *sh, copy_pool *cp);
void pin_unmap(void *base, size_t len);

#endif
