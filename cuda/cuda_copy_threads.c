/* cuda/cuda_copy_threads.c — the CUDA backend's persistent host copy threads: large host
 * memcpys cut into parallel slices, or whole jobs for staging; calls no CUDA. */
#include "cuda/copy_threads.h"
#include "base/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- copy threads ------------------------------------------------------------------ */

#define COPY_PARALLEL_MIN ((size_t)1 << 20) /* below this one memcpy is faster */

void copy_plain(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

struct copy_pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    copy_task *head, *tail;
    int stop;
    int nthreads;
    pthread_t threads[COPY_MAX_THREADS];
};

static void *copy_main(void *arg)
{
    copy_pool *cp = arg;
    pthread_mutex_lock(&cp->mu);
    for (;;) {
        while (!cp->head && !cp->stop)
            pthread_cond_wait(&cp->work_cv, &cp->mu);
        if (!cp->head)
            break;
        copy_task *t = cp->head;
        cp->head = t->next;
        if (!cp->head)
            cp->tail = NULL;
        pthread_mutex_unlock(&cp->mu);
        t->fn(t->dst, t->src, t->n);
        pthread_mutex_lock(&cp->mu);
        if (--*t->pending == 0)
            pthread_cond_broadcast(&cp->done_cv);
    }
    pthread_mutex_unlock(&cp->mu);
    return NULL;
}

static void copy_pool_stop(copy_pool *cp, int started)
{
    pthread_mutex_lock(&cp->mu);
    cp->stop = 1;
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
    pthread_mutex_init(&cp->mu, NULL);
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

/* Appends t to the queue; caller holds cp->mu. */
static void enqueue(copy_pool *cp, copy_task *t)
{
    t->next = NULL;
    if (cp->tail)
        cp->tail->next = t;
    else
        cp->head = t;
    cp->tail = t;
}

void copy_pool_submit_fn(copy_pool *cp, copy_job *j, copy_fn fn, void *dst, const void *src,
                         size_t n)
{
    pthread_mutex_lock(&cp->mu);
    j->pending = 1;
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
    pthread_mutex_lock(&cp->mu);
    while (j->pending > 0)
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
    j->pending = k;
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
static copy_task *take_own(copy_pool *cp, int *pending)
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
        return t;
    }
    return NULL;
}

void copy_pool_wait_split(copy_pool *cp, copy_split *j)
{
    pthread_mutex_lock(&cp->mu);
    while (j->pending > 0) {
        copy_task *t = take_own(cp, &j->pending);
        if (!t) {
            pthread_cond_wait(&cp->done_cv, &cp->mu);
            continue;
        }
        pthread_mutex_unlock(&cp->mu);
        t->fn(t->dst, t->src, t->n);
        pthread_mutex_lock(&cp->mu);
        if (--j->pending == 0)
            pthread_cond_broadcast(&cp->done_cv);
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
    int pending = 0;
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
