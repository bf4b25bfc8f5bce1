/* cuda/counter_gen.c — the host side of the built-in counter generator (counter_gen.h):
 * the seed's key, a threaded fill and a compare, and the fill enqueued on any backend. */
#include "cuda/counter_gen.h"
#include "cuda/kernels.h"
#include "base/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

uint64_t fhr_counter_key(const void *seed, size_t len)
{
    const unsigned char *s = seed;
    uint64_t k = 0x243F6A8885A308D3ULL;
    for (size_t off = 0; off < len; off += 8) {
        uint64_t w = 0;
        for (size_t b = 0; b < 8 && off + b < len; b++)
            w |= (uint64_t)s[off + b] << (8 * b);
        k = fhr_counter_mix(k ^ w) + 0x9E3779B97F4A7C15ULL;
    }
    return fhr_counter_mix(k ^ (uint64_t)len);
}

typedef struct part {
    unsigned char *p;
    const unsigned char *q;
    size_t off, end;
    uint64_t key, w0; /* w0: the stream's word at byte 0 of p */
    int bad;
} part;

static void fill_range(unsigned char *p, size_t off, size_t end, uint64_t key, uint64_t w0)
{
    uint64_t w = w0 + off / 8; /* off is a multiple of 8 */
    for (; off + 8 <= end; off += 8, w++) {
        uint64_t x = fhr_counter_word(key, w);
        memcpy(p + off, &x, 8);
    }
    if (off < end) {
        uint64_t x = fhr_counter_word(key, w);
        for (size_t k = 0; off + k < end; k++)
            p[off + k] = (unsigned char)(x >> (8 * k));
    }
}

static int differs_range(const unsigned char *p, size_t off, size_t end, uint64_t key,
                         uint64_t w0)
{
    uint64_t w = w0 + off / 8;
    for (; off + 8 <= end; off += 8, w++) {
        uint64_t x, want = fhr_counter_word(key, w);
        memcpy(&x, p + off, 8);
        if (x != want)
            return 1;
    }
    if (off < end) {
        uint64_t want = fhr_counter_word(key, w);
        for (size_t k = 0; off + k < end; k++)
            if (p[off + k] != (unsigned char)(want >> (8 * k)))
                return 1;
    }
    return 0;
}

static void *fill_thread(void *arg)
{
    part *t = arg;
    fill_range(t->p, t->off, t->end, t->key, t->w0);
    return NULL;
}

static void *differs_thread(void *arg)
{
    part *t = arg;
    t->bad = differs_range(t->q, t->off, t->end, t->key, t->w0);
    return NULL;
}

/* Splits [0, n) in 8-byte aligned parts over up to 8 threads (one below 16 MiB). */
static int split(void *(*fn)(void *), unsigned char *p, const unsigned char *q, size_t n,
                 uint64_t key, uint64_t w0)
{
    enum { NT = 8 };
    int nt = n < ((size_t)16 << 20) ? 1 : NT, bad = 0;
    pthread_t th[NT];
    part parts[NT];
    int started[NT] = {0};
    size_t chunk = (n / (size_t)nt + 7) / 8 * 8;
    for (int i = 0; i < nt; i++) {
        size_t off = (size_t)i * chunk, end = off + chunk < n && i + 1 < nt ? off + chunk : n;
        parts[i] = (part){p, q, off < n ? off : n, end, key, w0, 0};
        if (nt > 1)
            started[i] = pthread_create(&th[i], NULL, fn, &parts[i]) == 0;
        if (!started[i])
            fn(&parts[i]);
    }
    for (int i = 0; i < nt; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        bad |= parts[i].bad;
    }
    return bad;
}

void fhr_counter_fill_host(void *p, size_t n, uint64_t key)
{
    split(fill_thread, p, NULL, n, key, 0);
}

void fhr_counter_fill_host_at(void *p, size_t n, uint64_t key, uint64_t offset)
{
    split(fill_thread, p, NULL, n, key, offset / 8);
}

int fhr_counter_differs_host(const void *p, size_t n, uint64_t key)
{
    return split(differs_thread, NULL, p, n, key, 0);
}

int fhr_counter_differs_host_at(const void *p, size_t n, uint64_t key, uint64_t offset)
{
    return split(differs_thread, NULL, p, n, key, offset / 8);
}

typedef struct fill_job {
    void *p;
    size_t n;
    uint64_t key, offset;
} fill_job;

static void run_fill_job(void *arg)
{
    fill_job *j = arg;
    fhr_counter_fill_host_at(j->p, j->n, j->key, j->offset);
    free(j);
}

fhr_status fhr_counter_generate(fhr_backend *b, fhr_location at, fhr_stream *s, void *dst,
                                size_t n, uint64_t key, fhr_error *err)
{
    return fhr_counter_generate_at(b, at, s, dst, n, key, 0, err);
}

fhr_status fhr_counter_generate_at(fhr_backend *b, fhr_location at, fhr_stream *s, void *dst,
                                   size_t n, uint64_t key, uint64_t offset, fhr_error *err)
{
    if (offset % 8)
        return fhr_fail(err, FHR_E_INVALID, "counter generator: offset %llu is not a multiple "
                        "of 8", (unsigned long long)offset);
    if (!b || !s || (!dst && n))
        return fhr_fail(err, FHR_E_INVALID, "counter generator: backend, stream and memory are required");
    const char *kind = fhr_backend_kind(b);
    if (strcmp(kind, "model") == 0 || n == 0)
        return FHR_OK;
    if (at.kind == FHR_LOC_CUDA && strcmp(kind, "cuda") == 0)
        return fhk_counter_fill_at(s, dst, n, key, offset / 8, err);
    fill_job *j = malloc(sizeof *j);
    if (!j)
        return fhr_fail(err, FHR_E_NOMEM, "counter generator: out of host memory");
    *j = (fill_job){dst, n, key, offset};
    fhr_status st = b->ops->launch_host(b, s, run_fill_job, j, err);
    if (st != FHR_OK)
        free(j);
    return st;
}
