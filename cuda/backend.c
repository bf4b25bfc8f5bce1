/* cuda/backend.c — choosing a backend from a text spec ("auto", "cuda", "emu:N",
 * "model:N"), destroying one, and the thin public wrappers over the ops table. */
#include "fheplan/backend.h"
#include "base/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Parses the optional ":N" after a backend name: absent → 1. Returns 0 on a bad count. */
static int parse_count(const char *rest)
{
    if (*rest == '\0')
        return 1;
    if (*rest != ':' || rest[1] < '0' || rest[1] > '9')
        return 0;
    errno = 0;
    char *end = NULL;
    long n = strtol(rest + 1, &end, 10);
    if (errno || *end != '\0' || n < 1 || n > FHR_MAX_CUDA_DEVICES)
        return 0;
    return (int)n;
}

static int has_prefix(const char *s, const char *word)
{
    size_t n = strlen(word);
    return strncmp(s, word, n) == 0 && (s[n] == '\0' || s[n] == ':');
}

static fhr_status open_auto(fhr_backend **out, fhr_error *err)
{
    fhr_backend *b = NULL;
    if (fhr_backend_cuda_create(&b, NULL) == FHR_OK) {
        if (b->ops->device_count(b) >= 1) {
            *out = b;
            return FHR_OK;
        }
        fhr_backend_destroy(b);
    }
    return fhr_backend_emu_create(1, 0, out, err);
}

fhr_status fhr_backend_open(const char *spec, fhr_backend **out, fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "backend: NULL out pointer");
    if (!spec) {
        spec = getenv("FHEPLAN_DEVICE");
        if (!spec || !*spec)
            spec = "auto";
    }
    if (strcmp(spec, "auto") == 0)
        return open_auto(out, err);
    if (strcmp(spec, "cuda") == 0)
        return fhr_backend_cuda_create(out, err);
    int n = 0;
    const char *virt = strchr(spec, ',');
    if (virt && strcmp(virt, ",virtual") == 0) { /* the emulated device's virtual clock */
        char head[32];
        size_t len = (size_t)(virt - spec);
        if (len < sizeof head) {
            memcpy(head, spec, len);
            head[len] = '\0';
            if (has_prefix(head, "emu") && (n = parse_count(head + 3)) > 0)
                return fhr_backend_emu_create_virtual(n, 0, out, err);
        }
    }
    if (has_prefix(spec, "emu") && (n = parse_count(spec + 3)) > 0)
        return fhr_backend_emu_create(n, 0, out, err);
    if (has_prefix(spec, "model") && (n = parse_count(spec + 5)) > 0)
        return fhr_backend_model_create(n, out, err);
    return fhr_fail(err, FHR_E_INVALID,
                    "unknown device spec '%.64s' (want auto, cuda, emu, emu:N, emu:N,virtual, "
                    "model or model:N with N in 1..%d)",
                    spec, FHR_MAX_CUDA_DEVICES);
}

void fhr_backend_destroy(fhr_backend *b)
{
    if (b)
        b->ops->destroy(b);
}

uint64_t fhr_backend_clock_ns(fhr_backend *b, int *is_virtual)
{
    uint64_t ns = 0;
    int v = b && b->ops->clock && b->ops->clock(b, &ns);
    if (is_virtual)
        *is_virtual = v;
    if (v)
        return ns;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

fhr_status fhr_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out, fhr_error *err)
{
    if (!b || !out)
        return fhr_fail(err, FHR_E_INVALID, "stream_create: NULL backend or out pointer");
    return b->ops->stream_create(b, loc, out, err);
}

void fhr_stream_destroy(fhr_backend *b, fhr_stream *s)
{
    if (b && s)
        b->ops->stream_destroy(b, s);
}

fhr_status fhr_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    if (!b || !s)
        return fhr_fail(err, FHR_E_INVALID, "stream_sync: NULL backend or stream");
    return b->ops->stream_sync(b, s, err);
}

fhr_status fhr_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                           fhr_error *err)
{
    if (!b || !s || !fn)
        return fhr_fail(err, FHR_E_INVALID, "launch_host: NULL backend, stream or function");
    return b->ops->launch_host(b, s, fn, arg, err);
}

fhr_status fhr_stream_wrap(fhr_backend *b, fhr_location loc, void *native, fhr_stream **out,
                           fhr_error *err)
{
    if (!b || !out)
        return fhr_fail(err, FHR_E_INVALID, "stream_wrap: NULL backend or out pointer");
    *out = NULL;
    if (!b->ops->stream_wrap)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "stream_wrap: the %s backend has no native streams",
                        b->ops->name);
    return b->ops->stream_wrap(b, loc, native, out, err);
}

fhr_status fhr_stream_native(fhr_backend *b, fhr_stream *s, void **native, int *device,
                             fhr_error *err)
{
    if (!b || !s || !native)
        return fhr_fail(err, FHR_E_INVALID, "stream_native: NULL backend, stream or out pointer");
    if (!b->ops->stream_native)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "stream_native: the %s backend has no native streams",
                        b->ops->name);
    int dev = 0;
    fhr_status st = b->ops->stream_native(b, s, native, &dev, err);
    if (st == FHR_OK && device)
        *device = dev;
    return st;
}
