/* cuda/cuda_pinned.c — the pinned host pool of the CUDA backend: arenas of freshly mapped
 * memory (huge pages, faulted in by the copy threads: cuda/host_copy.c) page-locked with
 * cudaHostRegister (cudaHostAlloc when registration fails), carved by an address-ordered
 * first-fit free list that coalesces on release. */
#include "cuda/cuda_internal.h"

#if FHEPLAN_HAVE_CUDA
#include "base/error.h"
#include "cuda/host_copy.h"

#include <pthread.h>
#include <stdlib.h>

#define PIN_ALIGN ((size_t)256)

typedef struct pin_range { /* a free range of an arena, by offset */
    size_t off, size;
    struct pin_range *next;
} pin_range;

typedef struct pin_arena {
    char *base;
    size_t size;
    int registered; /* 1: mmap + cudaHostRegister; 0: cudaHostAlloc (the fallback) */
    pin_range *free; /* sorted by offset, never adjacent (coalesced) */
    struct pin_arena *next;
} pin_arena;

struct pin_pool {
    pin_shape shape;
    copy_pool *cp; /* faults arenas in (PIN_PREFAULT_THREADS) */
    /* FHEPLAN_PINNED_AHEAD: after each growth a thread pins one more arena of that size
     * for the next growth. ahead_mu orders growers; the thread's result is read after
     * pthread_join. A spare's bytes are in `reserved` from when it is pinned. */
    pthread_mutex_t ahead_mu;
    pthread_t ahead_th;
    int ahead_started; /* a thread to join */
    size_t ahead_size;
    void *ahead_base;  /* its arena, NULL when it failed */
    pthread_mutex_t mu;
    pin_arena *arenas;
    uint64_t used, reserved;
    unsigned registered, fallback; /* arenas by how they were pinned */
};

static size_t round_up(size_t n) { return (n + PIN_ALIGN - 1) / PIN_ALIGN * PIN_ALIGN; }

fhr_status pin_pool_create(const pin_shape *shape, copy_pool *cp, pin_pool **out,
                           fhr_error *err)
{
    pin_pool *pp = calloc(1, sizeof *pp);
    if (!pp)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for the pinned pool");
    pp->shape = *shape;
    pp->cp = cp;
    pthread_mutex_init(&pp->ahead_mu, NULL);
    pthread_mutex_init(&pp->mu, NULL);
    *out = pp;
    return FHR_OK;
}

/* First fit in one arena; NULL when nothing fits. Caller holds the mutex. */
static void *carve(pin_arena *a, size_t sz)
{
    for (pin_range **link = &a->free; *link; link = &(*link)->next) {
        pin_range *r = *link;
        if (r->size < sz)
            continue;
        void *p = a->base + r->off;
        r->off += sz;
        r->size -= sz;
        if (r->size == 0) {
            *link = r->next;
            free(r);
        }
        return p;
    }
    return NULL;
}

static void *carve_any(pin_pool *pp, size_t sz)
{
    for (pin_arena *a = pp->arenas; a; a = a->next) {
        void *p = carve(a, sz);
        if (p) {
            pp->used += sz;
            return p;
        }
    }
    return NULL;
}

/* Page-locks asz freshly mapped bytes (pin_map: huge pages and pages faulted in ahead as
 * the shape says; on the H200 registering fresh memory was about 8x faster than
 * cudaHostAlloc: 5 against 43 ms per 64 MiB); NULL when mapping or registration fails.
 * Portable, like cudaHostAllocPortable: every context sees the arena as pinned. */
static void *map_and_register(pin_pool *pp, size_t asz)
{
    void *base = pin_map(asz, &pp->shape, pp->cp);
    if (!base)
        return NULL;
    if (cudaHostRegister(base, asz, cudaHostRegisterPortable) != cudaSuccess) {
        cudaGetLastError(); /* the fallback decides; leave no sticky error behind */
        pin_unmap(base, asz);
        return NULL;
    }
    return base;
}

static void arena_unpin(pin_arena *a)
{
    if (a->registered) {
        cudaHostUnregister(a->base);
        pin_unmap(a->base, a->size);
    } else {
        cudaFreeHost(a->base);
    }
}

static void *ahead_main(void *arg)
{
    pin_pool *pp = arg;
    void *base = map_and_register(pp, pp->ahead_size);
    if (base) {
        pthread_mutex_lock(&pp->mu);
        pp->reserved += pp->ahead_size;
        pthread_mutex_unlock(&pp->mu);
    }
    pp->ahead_base = base;
    return NULL;
}

/* Waits for the spare's thread; returns the spare when it is asz bytes, else releases
 * it (NULL). Caller holds ahead_mu. */
static void *ahead_take(pin_pool *pp, size_t asz)
{
    if (!pp->ahead_started)
        return NULL;
    pthread_join(pp->ahead_th, NULL);
    pp->ahead_started = 0;
    void *base = pp->ahead_base;
    pp->ahead_base = NULL;
    if (base && pp->ahead_size != asz) {
        cudaHostUnregister(base);
        pin_unmap(base, pp->ahead_size);
        pthread_mutex_lock(&pp->mu);
        pp->reserved -= pp->ahead_size;
        pthread_mutex_unlock(&pp->mu);
        base = NULL;
    }
    return base;
}

void pin_pool_settle(pin_pool *pp)
{
    if (!pp)
        return;
    pthread_mutex_lock(&pp->ahead_mu);
    (void)ahead_take(pp, 0); /* no arena is 0 bytes: a spare is released */
    pthread_mutex_unlock(&pp->ahead_mu);
}

/* Adds an arena of at least sz bytes; pinning runs outside the pool mutex. */
static fhr_status grow(pin_pool *pp, size_t sz, fhr_error *err)
{
    size_t asz = pin_arena_bytes(sz, &pp->shape);
    if (asz == 0)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: %zu pinned bytes are more than an arena can "
                        "hold", sz);
    pin_arena *a = calloc(1, sizeof *a);
    pin_range *r = calloc(1, sizeof *r);
    if (!a || !r) {
        free(a);
        free(r);
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for a pinned arena");
    }
    int ahead = pp->shape.ahead && !pp->shape.hostalloc, counted = 0;
    void *base = NULL;
    if (ahead) {
        pthread_mutex_lock(&pp->ahead_mu);
        base = ahead_take(pp, asz);
        counted = base != NULL; /* its bytes are in `reserved` already */
    }
    if (!base && !pp->shape.hostalloc)
        base = map_and_register(pp, asz);
    if (ahead) { /* the next growth's arena, pinned while the caller uses this one */
        pp->ahead_size = asz;
        pp->ahead_base = NULL;
        pp->ahead_started = pthread_create(&pp->ahead_th, NULL, ahead_main, pp) == 0;
        pthread_mutex_unlock(&pp->ahead_mu);
    }
    a->registered = base != NULL;
    if (!base) {
        cudaError_t e = cudaHostAlloc(&base, asz, cudaHostAllocPortable);
        if (e != cudaSuccess) {
            free(a);
            free(r);
            return fhr_cuda_fail(err, e, "cudaHostAlloc (pinned arena, after cudaHostRegister "
                                         "of mapped memory failed)");
        }
    }
    a->base = base;
    a->size = asz;
    r->size = asz;
    a->free = r;
    pthread_mutex_lock(&pp->mu);
    a->next = pp->arenas;
    pp->arenas = a;
    if (!counted)
        pp->reserved += asz;
    if (a->registered)
        pp->registered++;
    else
        pp->fallback++;
    pthread_mutex_unlock(&pp->mu);
    return FHR_OK;
}

fhr_status pin_alloc(pin_pool *pp, size_t nbytes, void **out, fhr_error *err)
{
    size_t sz = round_up(nbytes);
    for (;;) {
        pthread_mutex_lock(&pp->mu);
        void *p = carve_any(pp, sz);
        pthread_mutex_unlock(&pp->mu);
        if (p) {
            *out = p;
            return FHR_OK;
        }
        fhr_status st = grow(pp, sz, err);
        if (st)
            return st;
    }
}

/* Inserts [off, off+sz) into the sorted free list, merging with both neighbours. */
static void give_back(pin_arena *a, size_t off, size_t sz)
{
    pin_range **link = &a->free, *prev = NULL;
    while (*link && (*link)->off < off) {
        prev = *link;
        link = &(*link)->next;
    }
    pin_range *next = *link;
    if (prev && prev->off + prev->size == off) {
        prev->size += sz;
        if (next && prev->off + prev->size == next->off) {
            prev->size += next->size;
            prev->next = next->next;
            free(next);
        }
        return;
    }
    if (next && off + sz == next->off) {
        next->off = off;
        next->size += sz;
        return;
    }
    pin_range *r = malloc(sizeof *r);
    if (!r)
        return; /* the range is lost to the pool (still freed at destroy) */
    r->off = off;
    r->size = sz;
    r->next = next;
    *link = r;
}

void pin_release(pin_pool *pp, void *p, size_t nbytes)
{
    size_t sz = round_up(nbytes);
    pthread_mutex_lock(&pp->mu);
    for (pin_arena *a = pp->arenas; a; a = a->next) {
        char *c = p;
        if (c >= a->base && c < a->base + a->size) {
            give_back(a, (size_t)(c - a->base), sz);
            pp->used -= sz;
            break;
        }
    }
    pthread_mutex_unlock(&pp->mu);
}

void pin_stats(pin_pool *pp, uint64_t *used, uint64_t *reserved)
{
    pthread_mutex_lock(&pp->mu);
    *used = pp->used;
    *reserved = pp->reserved;
    pthread_mutex_unlock(&pp->mu);
}

void pin_arenas(pin_pool *pp, unsigned *registered, unsigned *fallback)
{
    pthread_mutex_lock(&pp->mu);
    *registered = pp->registered;
    *fallback = pp->fallback;
    pthread_mutex_unlock(&pp->mu);
}

void pin_pool_destroy(pin_pool *pp)
{
    if (!pp)
        return;
    pin_pool_settle(pp);
    pthread_mutex_destroy(&pp->ahead_mu);
    while (pp->arenas) {
        pin_arena *a = pp->arenas;
        pp->arenas = a->next;
        while (a->free) {
            pin_range *r = a->free;
            a->free = r->next;
            free(r);
        }
        arena_unpin(a);
        free(a);
    }
    pthread_mutex_destroy(&pp->mu);
    free(pp);
}
#endif
