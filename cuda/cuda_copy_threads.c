/* cuda/cuda_copy_threads.c — the CUDA backend's persistent host copy threads: large host
 * memcpys cut into parallel slices, or whole jobs for staging; calls no CUDA. */
#include "cuda/copy_threads.h"
#include "base/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- copy threads ------------------------------------------------------------------ */

#define COPY_PARALLEL_MIN ((size_t)1 << 20) /* below this one memcpy is faster */

void copy_plain(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

struct copy_pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    copy_task *head, *tail;
    _Atomic int queued; /* tasks in the queue: what a spinning thread watches */
    _Atomic int stop;
    _Atomic long spin_ns; /* copy_pool_set_spin */
    int nthreads;
    pthread_t threads[COPY_MAX_THREADS];
};

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The end of a spin starting now (0: the pool does not spin). */
static long long spin_end(copy_pool *cp)
{
    long spin = atomic_load_explicit(&cp->spin_ns, memory_order_relaxed);
    return spin > 0 ? mono_ns() + spin : 0;
}

/* One more round of a spin ending at `end`, round i: 0 once it is over (the clock is read
 * every 64 rounds), else 1 after a pause. */
static int spin_on(long long end, unsigned i)
{
    if (!end || ((i & 63) == 63 && mono_ns() >= end))
        return 0;
    cpu_relax();
    return 1;
}

/* Polls *flag (without the lock) until it differs from `idle` or the pool's spin time has
 * passed; 1 when it changed. Called without cp->mu. */
static int spin_until(copy_pool *cp, _Atomic int *flag, int idle)
{
    long long end = spin_end(cp);
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(flag, memory_order_acquire) != idle)
            return end != 0;
        if (!spin_on(end, i))
            return 0;
    }
}

/* One finished task: its counter down, the waiters woken when it reaches 0. Caller holds
 * cp->mu. */
static void task_done(copy_pool *cp, _Atomic int *pending)
{
    if (atomic_fetch_sub_explicit(pending, 1, memory_order_acq_rel) == 1)
        pthread_cond_broadcast(&cp->done_cv);
}

/* Unlinks the queue's head; caller holds cp->mu and the queue is not empty. */
static copy_task *pop(copy_pool *cp)
{
    copy_task *t = cp->head;
    cp->head = t->next;
    if (!cp->head)
        cp->tail = NULL;
    atomic_fetch_sub_explicit(&cp->queued, 1, memory_order_relaxed);
    return t;
}

/* Returns with cp->mu held, after polling a while for queued work: a thread that sees work
 * takes the lock without sleeping on it (trylock), so that threads woken by one copy do
 * not queue up in the kernel behind each other; past the spin time it locks as usual. */
static void spin_for_work(copy_pool *cp)
{
    long long end = spin_end(cp);
    for (unsigned i = 0; end; i++) {
        if (atomic_load_explicit(&cp->queued, memory_order_acquire) > 0 &&
            pthread_mutex_trylock(&cp->mu) == 0)
            return;
        if (!spin_on(end, i))
            break;
    }
    pthread_mutex_lock(&cp->mu);
}

static void *copy_main(void *arg)
{
    copy_pool *cp = arg;
    pthread_mutex_lock(&cp->mu);
    for (;;) {
        if (!cp->head && !atomic_load(&cp->stop)) {
            /* spin a while before sleeping: a copy that follows soon finds this thread awake */
            pthread_mutex_unlock(&cp->mu);
            spin_for_work(cp);
        }
        if (!cp->head && !atomic_load(&cp->stop)) {
            pthread_cond_wait(&cp->work_cv, &cp->mu);
            continue; /* woken, or lost the task to another thread: spin again */
        }
        if (!cp->head)
            break;
        copy_task *t = pop(cp);
        pthread_mutex_unlock(&cp->mu);
        t->fn(t->dst, t->src, t->n);
        pthread_mutex_lock(&cp->mu);
        task_done(cp, t->pending);
    }
    pthread_mutex_unlock(&cp->mu);
    return NULL;
}

static void copy_pool_stop(copy_pool *cp, int started)
{
    pthread_mutex_lock(&cp->mu);
    atomic_store(&cp->stop, 1);
    pthread_cond_broadcast(&cp->work_cv);
    pthread_mutex_unlock(&cp->mu);
    for (int i = 0; i < started; i++)
        pthread_join(cp->threads[i], NULL);
}

fhr_status copy_pool_create(int nthreads, copy_pool **out, fhr_error *err)
{
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > COPY_MAX_THREADS)
        nthreads = COPY_MAX_THREADS;
    copy_pool *cp = calloc(1, sizeof *cp);
    if (!cp)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for copy threads");
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    /* held for a queue operation only: a contender spins briefly before sleeping */
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(&cp->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_cond_init(&cp->work_cv, NULL);
    pthread_cond_init(&cp->done_cv, NULL);
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&cp->threads[i], NULL, copy_main, cp) != 0) {
            copy_pool_stop(cp, i);
            free(cp);
            return fhr_fail(err, FHR_E_BACKEND, "cuda: cannot start host copy thread %d", i);
        }
    }
    cp->nthreads = nthreads;
    *out = cp;
    return FHR_OK;
}

int copy_pool_threads(const copy_pool *cp) { return cp->nthreads; }

void copy_pool_set_spin(copy_pool *cp, long spin_ns)
{
    atomic_store(&cp->spin_ns, spin_ns < 0 ? 0 : spin_ns);
}

/* Appends t to the queue; caller holds cp->mu. */
static void enqueue(copy_pool *cp, copy_task *t)
{
    t->next = NULL;
    if (cp->tail)
        cp->tail->next = t;
    else
        cp->head = t;
    cp->tail = t;
    atomic_fetch_add_explicit(&cp->queued, 1, memory_order_release);
}

void copy_pool_submit_fn(copy_pool *cp, copy_job *j, copy_fn fn, void *dst, const void *src,
                         size_t n)
{
    pthread_mutex_lock(&cp->mu);
    atomic_store_explicit(&j->pending, 1, memory_order_relaxed);
    j->task = (copy_task){fn, dst, src, n, &j->pending, NULL};
    enqueue(cp, &j->task);
    pthread_cond_signal(&cp->work_cv);
    pthread_mutex_unlock(&cp->mu);
}

void copy_pool_submit(copy_pool *cp, copy_job *j, void *dst, const void *src, size_t n)
{
    copy_pool_submit_fn(cp, j, copy_plain, dst, src, n);
}

void copy_pool_wait(copy_pool *cp, copy_job *j)
{
    if (spin_until(cp, &j->pending, 1) &&
        atomic_load_explicit(&j->pending, memory_order_acquire) == 0)
        return;
    pthread_mutex_lock(&cp->mu);
    while (atomic_load_explicit(&j->pending, memory_order_acquire) > 0)
        pthread_cond_wait(&cp->done_cv, &cp->mu);
    pthread_mutex_unlock(&cp->mu);
}

void copy_pool_submit_split(copy_pool *cp, copy_split *j, copy_fn fn, void *dst,
                            const void *src, size_t n, size_t piece)
{
    int k = 0;
    if (piece == 0)
        piece = n;
    for (size_t off = 0; off < n && k < COPY_MAX_PIECES; off += piece, k++) {
        size_t len = n - off < piece ? n - off : piece;
        if (k == COPY_MAX_PIECES - 1) /* never so when piece is as asked: the rest */
            len = n - off;
        j->task[k] = (copy_task){fn, (char *)dst + off, src ? (const char *)src + off : NULL,
                                 len, &j->pending, NULL};
    }
    j->pieces = k;
    pthread_mutex_lock(&cp->mu);
    atomic_store_explicit(&j->pending, k, memory_order_relaxed);
    for (int i = 0; i < k; i++)
        enqueue(cp, &j->task[i]);
    if (k > 1)
        pthread_cond_broadcast(&cp->work_cv);
    else if (k == 1)
        pthread_cond_signal(&cp->work_cv);
    pthread_mutex_unlock(&cp->mu);
}

/* The first queued task counted by `pending`, unlinked; NULL when none is queued. Caller
 * holds cp->mu. */
static copy_task *take_own(copy_pool *cp, _Atomic int *pending)
{
    copy_task *prev = NULL;
    for (copy_task *t = cp->head; t; prev = t, t = t->next) {
        if (t->pending != pending)
            continue;
        if (prev)
            prev->next = t->next;
        else
            cp->head = t->next;
        if (cp->tail == t)
            cp->tail = prev;
        atomic_fetch_sub_explicit(&cp->queued, 1, memory_order_relaxed);
        return t;
    }
    return NULL;
}

void copy_pool_wait_split(copy_pool *cp, copy_split *j)
{
    pthread_mutex_lock(&cp->mu);
    while (atomic_load_explicit(&j->pending, memory_order_acquire) > 0) {
        copy_task *t = take_own(cp, &j->pending);
        if (!t) {
            /* every piece is taken: spin for the threads' last ones before sleeping */
            int left = atomic_load_explicit(&j->pending, memory_order_acquire);
            pthread_mutex_unlock(&cp->mu);
            while (left > 0 && spin_until(cp, &j->pending, left))
                left = atomic_load_explicit(&j->pending, memory_order_acquire);
            pthread_mutex_lock(&cp->mu);
            if (atomic_load_explicit(&j->pending, memory_order_acquire) > 0)
                pthread_cond_wait(&cp->done_cv, &cp->mu);
            continue;
        }
        pthread_mutex_unlock(&cp->mu);
        t->fn(t->dst, t->src, t->n);
        pthread_mutex_lock(&cp->mu);
        task_done(cp, &j->pending);
    }
    pthread_mutex_unlock(&cp->mu);
}

void copy_pool_run(copy_pool *cp, copy_fn fn, void *dst, const void *src, size_t n,
                   size_t granule)
{
    int parts = cp->nthreads;
    size_t per = n / (size_t)parts + (n % (size_t)parts != 0);
    size_t slice = (per + granule - 1) & ~(granule - 1);
    if (parts < 2 || slice == 0 || slice >= n) {
        fn(dst, src, n);
        return;
    }
    copy_task tasks[COPY_MAX_THREADS];
    _Atomic int pending = 0;
    pthread_mutex_lock(&cp->mu);
    for (size_t off = slice; off < n; off += slice) {
        copy_task *t = &tasks[pending++];
        *t = (copy_task){fn, (char *)dst + off, src ? (const char *)src + off : NULL,
                         n - off < slice ? n - off : slice, &pending, NULL};
        enqueue(cp, t);
    }
    pthread_cond_broadcast(&cp->work_cv);
    pthread_mutex_unlock(&cp->mu);
    fn(dst, src, slice);
    pthread_mutex_lock(&cp->mu);
    while (pending > 0)
        pthread_cond_wait(&cp->done_cv, &cp->mu);
    pthread_mutex_unlock(&cp->mu);
}

/* Splits the copy into nthreads page-aligned slices: the caller copies the first one,
 * the pool the rest; returns when all are done. */
void copy_pool_memcpy(copy_pool *cp, void *dst, const void *src, size_t n)
{
    if (n < COPY_PARALLEL_MIN)
        memcpy(dst, src, n);
    else
        copy_pool_run(cp, copy_plain, dst, src, n, 4096);
}

void copy_pool_destroy(copy_pool *cp)
{
    if (!cp)
        return;
    copy_pool_stop(cp, cp->nthreads);
    pthread_cond_destroy(&cp->done_cv);
    pthread_cond_destroy(&cp->work_cv);
    pthread_mutex_destroy(&cp->mu);
    free(cp);
}
