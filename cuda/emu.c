/* cuda/emu.c — the emulated device: device memory in host RAM, every stream a worker
 * thread draining a FIFO, events as real completion markers with CUDA semantics.
 *
 * Two clocks. The wall clock (the default) times events by CLOCK_MONOTONIC when their
 * record runs. The virtual clock (fhr_backend_emu_create_virtual, "emu:N,virtual") is a
 * deterministic simulation: every stream is a timeline whose work is given simulated
 * start and end times when it is enqueued (the host's simulated time at that moment,
 * the stream's tail, an event waited for: the latest of them), a copy lasts its bytes
 * over the bandwidth profile's rate for its direction, `advance` models work of a given
 * duration, and everything else takes no time. The host's simulated time moves only
 * when it waits (stream or event sync, and a query that finds an event complete in
 * simulated time); an event is complete for the host when its simulated time has been
 * reached, whatever the worker threads have really done so far (a query that answers 1
 * first waits for the real work). So every figure and decision follows from the order
 * of calls alone, and none of it from how fast the machine runs the workers. */
#include "fheplan/backend.h"
#include "fheplan/residency.h"
#include "base/error.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A completion marker: one per event_record. The record op sets done; waits and the
 * event hold references. All marker fields are guarded by emu.sync_mu. */
typedef struct emu_marker {
    int done;
    int refs;
    uint64_t done_ns; /* when the record op ran (CLOCK_MONOTONIC) */
    uint64_t vt;      /* virtual clock: its simulated completion time, set when enqueued */
} emu_marker;

typedef enum emu_op_kind { OP_COPY, OP_FREE, OP_HOST, OP_RECORD, OP_WAIT, OP_ADVANCE } emu_op_kind;

typedef struct emu_op {
    struct emu_op *next;
    emu_op_kind kind;
    void *dst;
    const void *src;
    size_t n;
    fhr_location loc; /* OP_FREE: where the bytes are accounted */
    fhr_stream *queue; /* OP_FREE: the stream that runs it (its reuse credit) */
    fhr_host_fn fn;
    emu_marker *marker; /* OP_RECORD, OP_WAIT */
    uint64_t vt;        /* virtual clock: its simulated start */
} emu_op;

typedef struct emu emu;

struct fhr_stream {
    emu *owner;
    fhr_location loc;
    uint64_t id;
    fhr_stream *target; /* a view (fhr_stream_wrap): the stream all its work goes to */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* signalled on enqueue, completion and stop */
    emu_op *head, *tail;
    uint64_t enqueued, completed;
    int stop;
    /* Device bytes freed on this stream but not yet released (their frees still queued):
     * an allocation on the same stream reuses them, as a stream-ordered pool does.
     * Guarded by emu.mu. */
    uint64_t credit[FHR_LOC_SLOTS];
    uint64_t vt_tail; /* virtual clock: when its last enqueued work ends; emu.sync_mu */
};

struct fhr_event {
    emu_marker *marker; /* NULL: never recorded (complete); guarded by emu.sync_mu */
};

struct emu {
    fhr_backend base;
    int ndev;
    uint64_t capacity; /* per device; 0 = unlimited */
    pthread_mutex_t mu; /* accounting and stream ids */
    uint64_t used[FHR_LOC_SLOTS];
    uint64_t used_high[FHR_LOC_SLOTS];
    uint64_t next_stream_id;
    pthread_mutex_t sync_mu; /* markers, events and the virtual clock */
    pthread_cond_t sync_cv;  /* broadcast when any marker completes */
    int virt;                /* 1: the virtual clock */
    uint64_t host_vt;        /* virtual clock: the host's simulated time (ns) */
};

/* Virtual clock: the simulated start of the host function running on this thread (a
 * stream worker), so that a clock read inside it answers that time; NULL owner: not a
 * worker, or not inside a host function. */
static _Thread_local const struct emu *cur_owner;
static _Thread_local uint64_t cur_vt;

static emu *E(fhr_backend *b) { return (emu *)b->impl; }

/* Virtual clock: a copy within one device runs at the kernel model's default device
 * memory bandwidth (rplan_vm_opts.device_gbps), in GB/s. */
#define EMU_DEVICE_GBPS 3000.0

/* ---- locations and accounting ------------------------------------------------------ */

static fhr_status check_loc(emu *e, fhr_location loc, fhr_error *err)
{
    char buf[24];
    if (loc.kind == FHR_LOC_HOST || loc.kind == FHR_LOC_PINNED)
        return FHR_OK;
    if (loc.kind == FHR_LOC_CUDA && loc.index >= 0 && loc.index < e->ndev)
        return FHR_OK;
    return fhr_fail(err, FHR_E_LOCATION, "emu: invalid location %s (%d emulated device%s)",
                    fhr_loc_format(loc, buf, sizeof buf), e->ndev, e->ndev == 1 ? "" : "s");
}

static void unaccount(emu *e, fhr_location loc, size_t n)
{
    pthread_mutex_lock(&e->mu);
    e->used[fhr_loc_slot(loc)] -= n;
    pthread_mutex_unlock(&e->mu);
}

/* A queued device free runs: the bytes of it that no later allocation on its stream has
 * reused (the stream's credit) go back; the reused ones stay counted for their new owner. */
static void release_freed(emu *e, fhr_stream *q, fhr_location loc, size_t n)
{
    int slot = fhr_loc_slot(loc);
    pthread_mutex_lock(&e->mu);
    uint64_t back = q->credit[slot] < n ? q->credit[slot] : n;
    q->credit[slot] -= back;
    e->used[slot] -= back;
    pthread_mutex_unlock(&e->mu);
}

static void marker_unref_locked(emu_marker *m)
{
    if (m && --m->refs == 0)
        free(m);
}

/* ---- stream worker --------------------------------------------------------------- */

static void run_op(emu *e, emu_op *op)
{
    switch (op->kind) {
    case OP_COPY:
        memmove(op->dst, op->src, op->n);
        break;
    case OP_FREE:
        free(op->dst);
        if (op->queue)
            release_freed(e, op->queue, op->loc, op->n);
        else
            unaccount(e, op->loc, op->n);
        break;
    case OP_HOST:
        cur_owner = e;
        cur_vt = op->vt;
        op->fn(op->dst);
        cur_owner = NULL;
        break;
    case OP_ADVANCE: /* simulated time only: its duration was counted when enqueued */
        break;
    case OP_RECORD: {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        pthread_mutex_lock(&e->sync_mu);
        op->marker->done_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        op->marker->done = 1;
        marker_unref_locked(op->marker);
        pthread_cond_broadcast(&e->sync_cv);
        pthread_mutex_unlock(&e->sync_mu);
        break;
    }
    case OP_WAIT:
        pthread_mutex_lock(&e->sync_mu);
        while (!op->marker->done)
            pthread_cond_wait(&e->sync_cv, &e->sync_mu);
        marker_unref_locked(op->marker);
        pthread_mutex_unlock(&e->sync_mu);
        break;
    }
}

static void *stream_main(void *arg)
{
    fhr_stream *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head)
            break;
        emu_op *op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        run_op(s->owner, op);
        free(op);
        pthread_mutex_lock(&s->mu);
        s->completed++;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The stream that runs a stream's work: a view's target, else the stream itself. */
static fhr_stream *R(fhr_stream *s) { return s && s->target ? s->target : s; }

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Takes ownership of op (heap-allocated) and queues it behind earlier work. On the
 * virtual clock it starts at the latest of the host's time, the stream's tail and (a
 * wait) its event's time, and lasts dur ns. ev: an event that op (a record) now captures,
 * installed in the same step so that no wait sees the marker before its time is set. */
static void enqueue_timed(emu *e, fhr_stream *s, emu_op *op, uint64_t dur, fhr_event *ev)
{
    s = R(s);
    op->next = NULL;
    pthread_mutex_lock(&e->sync_mu);
    if (e->virt) {
        uint64_t t = max_u64(s->vt_tail, e->host_vt);
        if (op->kind == OP_WAIT)
            t = max_u64(t, op->marker->vt);
        op->vt = t;
        if (op->kind == OP_RECORD)
            op->marker->vt = t;
        s->vt_tail = t + dur;
    }
    if (ev) {
        marker_unref_locked(ev->marker);
        ev->marker = op->marker;
    }
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->enqueued++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&e->sync_mu);
}

static void enqueue(fhr_stream *s, emu_op *op) { enqueue_timed(R(s)->owner, s, op, 0, NULL); }

/* Virtual clock: a copy's simulated duration, its bytes over the bandwidth profile's
 * default rate for its direction (fhr_link_rates; within one device, the kernel model's
 * default device memory bandwidth), rounded up to whole nanoseconds. */
static uint64_t copy_ns(fhr_location d, fhr_location s, size_t n)
{
    double gbps = FHR_DEFAULT_PAGEABLE_GBPS; /* host and pinned among themselves */
    if (d.kind == FHR_LOC_CUDA && s.kind == FHR_LOC_CUDA)
        gbps = d.index == s.index ? EMU_DEVICE_GBPS : FHR_DEFAULT_PEER_GBPS;
    else if (d.kind == FHR_LOC_CUDA || s.kind == FHR_LOC_CUDA)
        gbps = (d.kind == FHR_LOC_PINNED || s.kind == FHR_LOC_PINNED) ? FHR_DEFAULT_PINNED_GBPS
                                                                       : FHR_DEFAULT_PAGEABLE_GBPS;
    double ns = (double)n / gbps; /* bytes / (GB/s) = ns */
    uint64_t whole = (uint64_t)ns;
    return whole + ((double)whole < ns);
}

static emu_op *new_op(emu_op_kind kind, fhr_error *err)
{
    emu_op *op = calloc(1, sizeof *op);
    if (!op)
        fhr_fail(err, FHR_E_NOMEM, "emu: out of host memory for a stream operation");
    else
        op->kind = kind;
    return op;
}

static fhr_status emu_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err);

/* ---- ops --------------------------------------------------------------------------- */

static int emu_device_count(fhr_backend *b) { return E(b)->ndev; }

static fhr_status emu_alloc(fhr_backend *b, fhr_location loc, size_t nbytes, fhr_stream *s,
                            void **out, fhr_error *err)
{
    emu *e = E(b);
    /* memory exists at once; on a device, bytes whose free is queued on the same stream
     * are reused (stream order makes them free by the time the new owner runs) */
    fhr_status st = check_loc(e, loc, err);
    if (st)
        return st;
    if (nbytes == 0 || !out)
        return fhr_fail(err, FHR_E_INVALID, "emu: alloc needs a non-zero size and an out pointer");
    int slot = fhr_loc_slot(loc);
    fhr_stream *q = loc.kind == FHR_LOC_CUDA ? R(s) : NULL;
    pthread_mutex_lock(&e->mu);
    uint64_t reuse = q ? (q->credit[slot] < nbytes ? q->credit[slot] : nbytes) : 0;
    uint64_t more = nbytes - reuse;
    int full = loc.kind == FHR_LOC_CUDA && e->capacity &&
               (e->used[slot] > e->capacity || more > e->capacity - e->used[slot]);
    if (!full) {
        if (q)
            q->credit[slot] -= reuse;
        e->used[slot] += more;
        if (e->used[slot] > e->used_high[slot])
            e->used_high[slot] = e->used[slot];
    }
    pthread_mutex_unlock(&e->mu);
    if (full)
        return fhr_fail(err, FHR_E_BACKEND, "out of memory on emu cuda:%d (%zu bytes asked)",
                        loc.index, nbytes);
    void *p = malloc(nbytes);
    if (!p) {
        pthread_mutex_lock(&e->mu);
        if (q)
            q->credit[slot] += reuse;
        e->used[slot] -= more;
        pthread_mutex_unlock(&e->mu);
        return fhr_fail(err, FHR_E_BACKEND, "emu: host malloc of %zu bytes failed", nbytes);
    }
    *out = p;
    return FHR_OK;
}

static void emu_free(fhr_backend *b, fhr_location loc, void *p, size_t nbytes, fhr_stream *s)
{
    emu *e = E(b);
    if (!p || check_loc(e, loc, NULL))
        return;
    emu_op *op = s ? new_op(OP_FREE, NULL) : NULL;
    if (!op) { /* no stream (p is idle), or no memory to queue: wait, then free now */
        if (s)
            emu_stream_sync(b, s, NULL);
        free(p);
        unaccount(e, loc, nbytes);
        return;
    }
    op->dst = p;
    op->n = nbytes;
    op->loc = loc;
    if (loc.kind == FHR_LOC_CUDA) { /* reusable by later allocations on this stream */
        op->queue = R(s);
        pthread_mutex_lock(&e->mu);
        op->queue->credit[fhr_loc_slot(loc)] += nbytes;
        pthread_mutex_unlock(&e->mu);
    }
    enqueue(s, op);
}

static fhr_status emu_copy(fhr_backend *b, void *dst, fhr_location dloc, const void *src,
                           fhr_location sloc, size_t n, fhr_stream *s, fhr_error *err)
{
    emu *e = E(b);
    fhr_status st = check_loc(e, dloc, err);
    if (!st)
        st = check_loc(e, sloc, err);
    if (st)
        return st;
    if (!s || (n && (!dst || !src)))
        return fhr_fail(err, FHR_E_INVALID, "emu: copy needs a stream and non-NULL buffers");
    emu_op *op = new_op(OP_COPY, err);
    if (!op)
        return FHR_E_NOMEM;
    op->dst = dst;
    op->src = src;
    op->n = n;
    enqueue_timed(e, s, op, e->virt ? copy_ns(dloc, sloc, n) : 0, NULL);
    return FHR_OK;
}

static fhr_status emu_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                    fhr_error *err)
{
    emu *e = E(b);
    fhr_status st = check_loc(e, loc, err);
    if (st)
        return st;
    fhr_stream *s = calloc(1, sizeof *s);
    if (!s)
        return fhr_fail(err, FHR_E_NOMEM, "emu: out of host memory for a stream");
    s->owner = e;
    s->loc = loc;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_lock(&e->mu);
    s->id = ++e->next_stream_id;
    pthread_mutex_unlock(&e->mu);
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return fhr_fail(err, FHR_E_BACKEND, "emu: cannot start a stream worker thread");
    }
    *out = s;
    return FHR_OK;
}

static void emu_stream_destroy(fhr_backend *b, fhr_stream *s)
{
    (void)b;
    if (!s)
        return;
    if (s->target) { /* a view: the wrapped stream is not ours to stop */
        free(s);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->stop = 1; /* the worker drains the queue before it exits */
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static fhr_status emu_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    emu *e = E(b);
    if (!s)
        return fhr_fail(err, FHR_E_INVALID, "emu: stream_sync on a NULL stream");
    s = R(s);
    pthread_mutex_lock(&e->sync_mu); /* the work and its simulated end, taken together */
    uint64_t vt = s->vt_tail;
    pthread_mutex_lock(&s->mu);
    pthread_mutex_unlock(&e->sync_mu);
    uint64_t target = s->enqueued;
    while (s->completed < target)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (e->virt) {
        pthread_mutex_lock(&e->sync_mu);
        e->host_vt = max_u64(e->host_vt, vt);
        pthread_mutex_unlock(&e->sync_mu);
    }
    return FHR_OK;
}

static fhr_status emu_event_create(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    (void)b;
    fhr_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return fhr_fail(err, FHR_E_NOMEM, "emu: out of host memory for an event");
    *out = ev;
    return FHR_OK;
}

static void emu_event_destroy(fhr_backend *b, fhr_event *ev)
{
    emu *e = E(b);
    if (!ev)
        return;
    pthread_mutex_lock(&e->sync_mu);
    marker_unref_locked(ev->marker);
    pthread_mutex_unlock(&e->sync_mu);
    free(ev);
}

static fhr_status emu_event_record(fhr_backend *b, fhr_event *ev, fhr_stream *s,
                                   fhr_error *err)
{
    emu *e = E(b);
    if (!ev || !s)
        return fhr_fail(err, FHR_E_INVALID, "emu: event_record needs an event and a stream");
    emu_op *op = new_op(OP_RECORD, err);
    emu_marker *m = op ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        free(op);
        return fhr_fail(err, FHR_E_NOMEM, "emu: out of host memory for an event record");
    }
    m->refs = 2; /* the event and the queued record op */
    op->marker = m;
    enqueue_timed(e, s, op, 0, ev);
    return FHR_OK;
}

static int emu_event_query(fhr_backend *b, fhr_event *ev)
{
    emu *e = E(b);
    if (!ev)
        return -1;
    pthread_mutex_lock(&e->sync_mu);
    emu_marker *m = ev->marker;
    int done = !m || m->done;
    if (e->virt && m) { /* complete once the host's simulated time reached it */
        done = m->vt <= e->host_vt;
        if (done && !m->done) { /* ... and then the real work is waited for */
            m->refs++;
            while (!m->done)
                pthread_cond_wait(&e->sync_cv, &e->sync_mu);
            marker_unref_locked(m);
        }
    }
    pthread_mutex_unlock(&e->sync_mu);
    return done;
}

static fhr_status emu_event_sync(fhr_backend *b, fhr_event *ev, fhr_error *err)
{
    emu *e = E(b);
    if (!ev)
        return fhr_fail(err, FHR_E_INVALID, "emu: event_sync on a NULL event");
    pthread_mutex_lock(&e->sync_mu);
    emu_marker *m = ev->marker; /* the capture at call time, even if re-recorded meanwhile */
    if (m) {
        m->refs++;
        while (!m->done)
            pthread_cond_wait(&e->sync_cv, &e->sync_mu);
        if (e->virt)
            e->host_vt = max_u64(e->host_vt, m->vt);
        marker_unref_locked(m);
    }
    pthread_mutex_unlock(&e->sync_mu);
    return FHR_OK;
}

/* Every emulated event captures its completion time: real, or simulated. */
static fhr_status emu_event_elapsed(fhr_backend *b, fhr_event *from, fhr_event *to,
                                    double *seconds, fhr_error *err)
{
    emu *e = E(b);
    if (!from || !to || !seconds)
        return fhr_fail(err, FHR_E_INVALID, "emu: event_elapsed needs two events and an out");
    pthread_mutex_lock(&e->sync_mu);
    emu_marker *a = from->marker, *z = to->marker;
    int ok = a && z && a->done && z->done;
    double d = !ok ? 0
               : e->virt ? ((double)z->vt - (double)a->vt) * 1e-9
                         : ((double)z->done_ns - (double)a->done_ns) * 1e-9;
    pthread_mutex_unlock(&e->sync_mu);
    if (!ok)
        return fhr_fail(err, FHR_E_INVALID, "emu: event_elapsed on an event not recorded or "
                        "not complete");
    *seconds = d;
    return FHR_OK;
}

static fhr_status emu_stream_wait_event(fhr_backend *b, fhr_stream *s, fhr_event *ev,
                                        fhr_error *err)
{
    emu *e = E(b);
    if (!s || !ev)
        return fhr_fail(err, FHR_E_INVALID, "emu: stream_wait_event needs a stream and an event");
    emu_op *op = new_op(OP_WAIT, err);
    if (!op)
        return FHR_E_NOMEM;
    pthread_mutex_lock(&e->sync_mu);
    op->marker = ev->marker;
    if (op->marker)
        op->marker->refs++;
    pthread_mutex_unlock(&e->sync_mu);
    if (!op->marker) { /* never recorded: nothing to wait for */
        free(op);
        return FHR_OK;
    }
    enqueue(s, op);
    return FHR_OK;
}

/* Virtual clock only: simulated work of ns on s (nothing runs). */
static fhr_status emu_advance(fhr_backend *b, fhr_stream *s, uint64_t ns, fhr_error *err)
{
    emu *e = E(b);
    if (!e->virt)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "emu: advance needs the virtual clock");
    if (!s)
        return fhr_fail(err, FHR_E_INVALID, "emu: advance needs a stream");
    emu_op *op = new_op(OP_ADVANCE, err);
    if (!op)
        return FHR_E_NOMEM;
    enqueue_timed(e, s, op, ns, NULL);
    return FHR_OK;
}

/* Virtual clock: the host's simulated time, or inside a host function running on a
 * stream, the time that function runs at. */
static int emu_clock(fhr_backend *b, uint64_t *ns)
{
    emu *e = E(b);
    if (!e->virt)
        return 0;
    if (cur_owner == e) {
        *ns = cur_vt;
        return 1;
    }
    pthread_mutex_lock(&e->sync_mu);
    *ns = e->host_vt;
    pthread_mutex_unlock(&e->sync_mu);
    return 1;
}

static fhr_status emu_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                  fhr_error *err)
{
    (void)b;
    if (!s || !fn)
        return fhr_fail(err, FHR_E_INVALID, "emu: launch_host needs a stream and a function");
    emu_op *op = new_op(OP_HOST, err);
    if (!op)
        return FHR_E_NOMEM;
    op->fn = fn;
    op->dst = arg;
    enqueue(s, op);
    return FHR_OK;
}

static void emu_observe(fhr_backend *b, fhr_location loc, fhr_observation *out)
{
    emu *e = E(b);
    memset(out, 0, sizeof *out);
    if (check_loc(e, loc, NULL))
        return;
    pthread_mutex_lock(&e->mu);
    uint64_t used = e->used[fhr_loc_slot(loc)], high = e->used_high[fhr_loc_slot(loc)];
    pthread_mutex_unlock(&e->mu);
    out->valid = 1;
    out->pool_used_bytes = used;
    out->pool_reserved_bytes = used;
    out->pool_used_high_bytes = high;
    out->pool_reserved_high_bytes = high;
    if (loc.kind == FHR_LOC_CUDA && e->capacity) {
        out->device_total_bytes = e->capacity;
        out->device_free_bytes = used < e->capacity ? e->capacity - used : 0;
    }
}

static uint64_t emu_stream_id(fhr_backend *b, fhr_stream *s)
{
    (void)b;
    return s ? R(s)->id : 0; /* a view is the same stream as the one it wraps */
}

/* The emulated device's native streams are its own: a view stands in for an engine's
 * stream wrapped through fhr_stream_wrap, so CI runs the foreign-stream paths. */
static fhr_status emu_stream_wrap(fhr_backend *b, fhr_location loc, void *native,
                                  fhr_stream **out, fhr_error *err)
{
    emu *e = E(b);
    char lb[16];
    fhr_status st = check_loc(e, loc, err);
    if (st)
        return st;
    fhr_stream *t = R(native);
    if (!t || t->owner != e)
        return fhr_fail(err, FHR_E_INVALID,
                        "emu: stream_wrap needs a stream this emulated device created");
    if (!fhr_loc_equal(t->loc, loc))
        return fhr_fail(err, FHR_E_LOCATION, "emu: stream_wrap: the stream runs for %s",
                        fhr_loc_format(t->loc, lb, sizeof lb));
    fhr_stream *v = calloc(1, sizeof *v);
    if (!v)
        return fhr_fail(err, FHR_E_NOMEM, "emu: out of host memory for a stream view");
    v->owner = e;
    v->loc = loc;
    v->id = t->id;
    v->target = t;
    *out = v;
    return FHR_OK;
}

static fhr_status emu_stream_native(fhr_backend *b, fhr_stream *s, void **native, int *device,
                                    fhr_error *err)
{
    if (!s || s->owner != E(b))
        return fhr_fail(err, FHR_E_INVALID, "emu: stream_native: not a stream of this backend");
    *native = R(s);
    *device = s->loc.kind == FHR_LOC_CUDA ? s->loc.index : 0;
    return FHR_OK;
}

static void emu_destroy(fhr_backend *b)
{
    emu *e = E(b);
    pthread_cond_destroy(&e->sync_cv);
    pthread_mutex_destroy(&e->sync_mu);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static const fhr_backend_ops emu_ops = {
    .name = "emu",
    .device_count = emu_device_count,
    .alloc = emu_alloc,
    .free = emu_free,
    .copy = emu_copy,
    .stream_create = emu_stream_create,
    .stream_destroy = emu_stream_destroy,
    .stream_sync = emu_stream_sync,
    .event_create = emu_event_create,
    .event_destroy = emu_event_destroy,
    .event_record = emu_event_record,
    .event_query = emu_event_query,
    .event_sync = emu_event_sync,
    .stream_wait_event = emu_stream_wait_event,
    .launch_host = emu_launch_host,
    .observe = emu_observe,
    .stream_id = emu_stream_id,
    .destroy = emu_destroy,
    .stream_wrap = emu_stream_wrap,
    .stream_native = emu_stream_native,
    .event_create_timed = emu_event_create,
    .event_elapsed = emu_event_elapsed,
    .clock = emu_clock,
    .advance = emu_advance,
};

static fhr_status emu_create(int ndev, uint64_t capacity_bytes, int virt, fhr_backend **out,
                             fhr_error *err)
{
    if (ndev < 1 || ndev > FHR_MAX_CUDA_DEVICES || !out)
        return fhr_fail(err, FHR_E_INVALID, "emu: device count %d is not in 1..%d", ndev,
                        FHR_MAX_CUDA_DEVICES);
    emu *e = calloc(1, sizeof *e);
    if (!e)
        return fhr_fail(err, FHR_E_NOMEM, "emu: out of host memory");
    e->base.ops = &emu_ops;
    e->base.impl = e;
    e->ndev = ndev;
    e->capacity = capacity_bytes;
    e->virt = virt;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->sync_mu, NULL);
    pthread_cond_init(&e->sync_cv, NULL);
    *out = &e->base;
    return FHR_OK;
}


fhr_status fhr_backend_emu_create(int ndev, uint64_t capacity_bytes, fhr_backend **out,
                                  fhr_error *err)
{
    return emu_create(ndev, capacity_bytes, 0, out, err);
}

fhr_status fhr_backend_emu_create_virtual(int ndev, uint64_t capacity_bytes, fhr_backend **out,
                                          fhr_error *err)
{
    return emu_create(ndev, capacity_bytes, 1, out, err);
}
