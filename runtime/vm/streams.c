/* runtime/vm/streams.c — the VM's clock and its streams: one compute and one transfer stream
 * per location, made on first use, synchronised together; the pinned -> device bandwidth
 * probe and the device generation rate. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The backend's clock: simulated time on a virtual clock, else CLOCK_MONOTONIC. */
uint64_t vm_now_ns(const rplan_vm *vm) { return fhr_backend_clock_ns(vm->b, NULL); }

int vm_virtual(const rplan_vm *vm)
{
    int v = 0;
    fhr_backend_clock_ns(vm->b, &v);
    return v;
}

fhr_status vm_compute_stream(rplan_vm *vm, fhr_location loc, fhr_stream **out, fhr_error *err)
{
    *out = NULL;
    int slot = fhr_loc_slot(loc);
    if (slot < 0)
        return fhr_fail(err, FHR_E_LOCATION, "invalid location");
    if (!vm->compute[slot]) {
        fhr_status st = vm->b->ops->stream_create(vm->b, loc, &vm->compute[slot], err);
        if (st != FHR_OK)
            return st;
    }
    *out = vm->compute[slot];
    return FHR_OK;
}

fhr_stream *vm_xfer_stream(rplan_vm *vm, fhr_location loc, fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    if (slot < 0) {
        fhr_fail(err, FHR_E_LOCATION, "invalid location");
        return NULL;
    }
    if (!vm->xfer[slot] && vm->b->ops->stream_create(vm->b, loc, &vm->xfer[slot], err) != FHR_OK)
        return NULL;
    return vm->xfer[slot];
}

fhr_status vm_sync_all(rplan_vm *vm, fhr_error *err)
{
    fhr_status st;
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (vm->xfer[i] && (st = vm->b->ops->stream_sync(vm->b, vm->xfer[i], err)) != FHR_OK)
            return st;
        if (vm->compute[i] &&
            (st = vm->b->ops->stream_sync(vm->b, vm->compute[i], err)) != FHR_OK)
            return st;
    }
    if (vm->m)
        fhr_reap(vm->m, NULL, NULL);
    return FHR_OK;
}

/* Device generation rate of seeded fields in GB/s: configured, FHEPLAN_GEN_GBPS, or 496
 * (90 MiB of a halves in 0.19 ms by Phantom's sampler on an H200; bench/regen.c measures
 * the built-in generator). */
double vm_gen_rate(const rplan_vm *vm)
{
    if (vm->o.gen_gbps > 0)
        return vm->o.gen_gbps;
    const char *env = getenv("FHEPLAN_GEN_GBPS");
    if (env && atof(env) > 0)
        return atof(env);
    return 496.0;
}

/* Device <-> device bandwidth in GB/s: configured, FHEPLAN_PEER_GBPS, or the default. */
double vm_peer_rate(const rplan_vm *vm)
{
    if (vm->o.peer_gbps > 0)
        return vm->o.peer_gbps;
    const char *env = getenv("FHEPLAN_PEER_GBPS");
    if (env && atof(env) > 0)
        return atof(env);
    return FHR_DEFAULT_PEER_GBPS;
}

/* The declared pinned host -> device rate in GB/s, by which every decision is made, in
 * check and in a run alike: configured, FHEPLAN_PINNED_GBPS, or 55.5 (medians measured
 * on an H200, bench/README.md). Never a measured figure (one schedule: fheplan(1)). */
double vm_profile_gbps(const rplan_vm *vm)
{
    if (vm->o.pinned_gbps > 0)
        return vm->o.pinned_gbps;
    const char *env = getenv("FHEPLAN_PINNED_GBPS");
    if (env && atof(env) > 0)
        return atof(env);
    return 55.5;
}

/* Pinned host -> device bandwidth in GB/s for the report's figures (never for a
 * decision: vm_profile_gbps): configured, FHEPLAN_PINNED_GBPS, or measured:
 * on CUDA the median of five copies of 256 MiB, each timed alone (one copy can catch the
 * link in a slow moment: single measurements of three copies spread by 3% on an H200),
 * on the emulated device three copies of 32 MiB together. */
double vm_pinned_bandwidth(rplan_vm *vm)
{
    if (vm->o.pinned_gbps > 0 || getenv("FHEPLAN_PINNED_GBPS") || vm->explain)
        return vm_profile_gbps(vm);
    if (vm->b->ops->device_count(vm->b) < 1)
        return 0;
    size_t n = vm->is_cuda ? (size_t)256 << 20 : (size_t)32 << 20;
    int reps = vm->is_cuda ? 5 : 1, per = vm->is_cuda ? 1 : 3;
    fhr_location dev = fhr_loc_cuda(0), pin = fhr_loc_pinned();
    fhr_stream *s = vm_xfer_stream(vm, dev, NULL);
    void *src = NULL, *dst = NULL;
    double gbps = 0, r[5];
    if (s && vm->b->ops->alloc(vm->b, pin, n, NULL, &src, NULL) == FHR_OK &&
        vm->b->ops->alloc(vm->b, dev, n, s, &dst, NULL) == FHR_OK) {
        memset(src, 1, n);
        vm->b->ops->copy(vm->b, dst, dev, src, pin, n, s, NULL); /* warm up */
        vm->b->ops->stream_sync(vm->b, s, NULL);
        int ok = 1;
        for (int k = 0; k < reps && ok; k++) {
            uint64_t t0 = vm_now_ns(vm);
            for (int c = 0; c < per; c++)
                ok &= vm->b->ops->copy(vm->b, dst, dev, src, pin, n, s, NULL) == FHR_OK;
            ok &= vm->b->ops->stream_sync(vm->b, s, NULL) == FHR_OK;
            uint64_t dt = vm_now_ns(vm) - t0;
            r[k] = dt ? (double)per * (double)n / (double)dt : 0;
        }
        for (int a = 1; a < reps; a++) /* the median */
            for (int b = a; b > 0 && r[b] < r[b - 1]; b--) {
                double t = r[b];
                r[b] = r[b - 1];
                r[b - 1] = t;
            }
        if (ok)
            gbps = r[reps / 2];
    }
    if (dst)
        vm->b->ops->free(vm->b, dev, dst, n, s);
    if (src)
        vm->b->ops->free(vm->b, pin, src, n, s);
    if (s)
        vm->b->ops->stream_sync(vm->b, s, NULL);
    return gbps;
}
