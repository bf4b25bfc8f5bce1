// cuda/kernels.cu — the built-in rehearsal kernels on CUDA behind the C ABI of
// kernels.h: synthetic fill, touch, verify, spin and the key-switch multiply-accumulate.
#include "cuda/kernels.h"
#include "cuda/counter_gen.h"
#include "fheplan/vm.h"

#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

extern "C" fhr_status fhr_fail(fhr_error *err, fhr_status st, const char *fmt, ...);

namespace {

__global__ void k_fill(uint64_t *d, size_t nwords, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nwords;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = rplan_synth_word(seed, i);
}

__global__ void k_fill_tail(unsigned char *d, size_t off, size_t n, uint64_t seed)
{
    uint64_t w = rplan_synth_word(seed, off / 8);
    for (size_t k = 0; k < n; k++)
        d[off + k] = (unsigned char)(w >> (8 * k));
}

__global__ void k_touch(const uint64_t *d, size_t nwords, uint64_t *sink)
{
    uint64_t acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nwords;
         i += (size_t)gridDim.x * blockDim.x)
        acc ^= d[i];
    if (acc == 0x5eedULL) // practically never; keeps the loads alive
        atomicXor((unsigned long long *)sink, (unsigned long long)acc);
}

__global__ void k_verify(const uint64_t *d, size_t nwords, const unsigned char *tail,
                         size_t ntail, int synth, uint64_t seed, uint64_t w0,
                         unsigned long long *bad, unsigned long long *flag)
{
    unsigned diff = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nwords;
         i += (size_t)gridDim.x * blockDim.x)
        diff |= d[i] != (synth ? rplan_synth_word(seed, w0 + i) : 0);
    if (blockIdx.x == 0 && threadIdx.x == 0 && ntail) {
        uint64_t w = synth ? rplan_synth_word(seed, w0 + nwords) : 0;
        for (size_t k = 0; k < ntail; k++)
            diff |= tail[k] != (unsigned char)(w >> (8 * k));
    }
    if (diff)
        atomicOr(flag, 1ULL);
    (void)bad;
}

__global__ void k_verify_fold(unsigned long long *flag, unsigned long long *bad)
{
    if (*flag)
        *bad += 1;
    *flag = 0;
}

__global__ void k_spin(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

__global__ void k_keyswitch(const uint64_t *ct, size_t nct, const uint64_t *key, size_t nkey,
                            uint64_t *acc, size_t nacc)
{
    const uint64_t q = FHK_MODULUS;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < nacc;
         j += (size_t)gridDim.x * blockDim.x) {
        uint64_t a = acc[j] % q, c = ct[j % nct] % q;
        for (size_t i = j; i < nkey; i += nacc)
            a = (a + c * (key[i] % q)) % q;
        acc[j] = a;
    }
}

__global__ void k_counter_fill(uint64_t *d, size_t nwords, uint64_t key, uint64_t w0)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nwords;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = fhr_counter_word(key, w0 + i);
}

__global__ void k_counter_tail(unsigned char *d, size_t off, size_t n, uint64_t key, uint64_t w0)
{
    uint64_t w = fhr_counter_word(key, w0 + off / 8);
    for (size_t k = 0; k < n; k++)
        d[off + k] = (unsigned char)(w >> (8 * k));
}

__global__ void k_counter_verify(const uint64_t *d, size_t nwords, const unsigned char *tail,
                                 size_t ntail, uint64_t key, uint64_t w0,
                                 unsigned long long *flag)
{
    unsigned diff = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nwords;
         i += (size_t)gridDim.x * blockDim.x)
        diff |= d[i] != fhr_counter_word(key, w0 + i);
    if (blockIdx.x == 0 && threadIdx.x == 0 && ntail) {
        uint64_t w = fhr_counter_word(key, w0 + nwords);
        for (size_t k = 0; k < ntail; k++)
            diff |= tail[k] != (unsigned char)(w >> (8 * k));
    }
    if (diff)
        atomicOr(flag, 1ULL);
}

fhr_status launched(fhr_error *err, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return fhr_fail(err, FHR_E_BACKEND, "cuda kernel %s: %s", what, cudaGetErrorString(e));
    return FHR_OK;
}

cudaStream_t native(fhr_stream *s)
{
    int dev = 0;
    cudaStream_t st = (cudaStream_t)fhr_cuda_stream_native(s, &dev);
    cudaSetDevice(dev);
    return st;
}

unsigned grid_for(size_t nwords)
{
    size_t g = (nwords + 255) / 256;
    if (g > 4096) g = 4096;
    if (g == 0) g = 1;
    return (unsigned)g;
}

} // namespace

extern "C" fhr_status fhk_synth_fill(fhr_stream *s, void *d, size_t n, uint64_t seed,
                                     fhr_error *err)
{
    cudaStream_t st = native(s);
    size_t nw = n / 8;
    if (nw)
        k_fill<<<grid_for(nw), 256, 0, st>>>((uint64_t *)d, nw, seed);
    if (n % 8)
        k_fill_tail<<<1, 1, 0, st>>>((unsigned char *)d, nw * 8, n % 8, seed);
    return launched(err, "synth_fill");
}

extern "C" fhr_status fhk_zero(fhr_stream *s, void *d, size_t n, fhr_error *err)
{
    cudaStream_t st = native(s);
    cudaError_t e = cudaMemsetAsync(d, 0, n, st);
    if (e != cudaSuccess)
        return fhr_fail(err, FHR_E_BACKEND, "cudaMemsetAsync: %s", cudaGetErrorString(e));
    return FHR_OK;
}

extern "C" fhr_status fhk_touch(fhr_stream *s, const void *d, size_t n, uint64_t *sink,
                                fhr_error *err)
{
    cudaStream_t st = native(s);
    size_t nw = n / 8;
    if (nw)
        k_touch<<<grid_for(nw), 256, 0, st>>>((const uint64_t *)d, nw, sink);
    return launched(err, "touch");
}

extern "C" fhr_status fhk_verify(fhr_stream *s, const void *d, size_t n, int synth, uint64_t seed,
                                 unsigned long long *mismatches, fhr_error *err)
{
    return fhk_verify_at(s, d, n, synth, seed, 0, mismatches, err);
}

extern "C" fhr_status fhk_verify_at(fhr_stream *s, const void *d, size_t n, int synth,
                                    uint64_t seed, uint64_t w0, unsigned long long *mismatches,
                                    fhr_error *err)
{
    cudaStream_t st = native(s);
    size_t nw = n / 8;
    // mismatches[0]: the count, mismatches[1]: scratch flag for this call
    k_verify<<<grid_for(nw), 256, 0, st>>>((const uint64_t *)d, nw,
                                           (const unsigned char *)d + nw * 8, n % 8, synth, seed,
                                           w0, mismatches, mismatches + 1);
    k_verify_fold<<<1, 1, 0, st>>>(mismatches + 1, mismatches);
    return launched(err, "verify");
}

extern "C" fhr_status fhk_spin(fhr_stream *s, uint64_t ns, fhr_error *err)
{
    cudaStream_t st = native(s);
    k_spin<<<1, 1, 0, st>>>(ns);
    return launched(err, "spin");
}

extern "C" fhr_status fhk_keyswitch(fhr_stream *s, const uint64_t *ct, size_t nct,
                                    const uint64_t *key, size_t nkey, uint64_t *acc, size_t nacc,
                                    uint32_t repeat, fhr_error *err)
{
    cudaStream_t st = native(s);
    if (!nct || !nkey || !nacc)
        return FHR_OK;
    for (uint32_t r = 0; r < repeat; r++)
        k_keyswitch<<<grid_for(nacc), 256, 0, st>>>(ct, nct, key, nkey, acc, nacc);
    return launched(err, "keyswitch");
}

extern "C" fhr_status fhk_counter_fill_at(fhr_stream *s, void *d, size_t n, uint64_t key,
                                          uint64_t w0, fhr_error *err)
{
    cudaStream_t st = native(s);
    size_t nw = n / 8;
    if (nw)
        k_counter_fill<<<grid_for(nw), 256, 0, st>>>((uint64_t *)d, nw, key, w0);
    if (n % 8)
        k_counter_tail<<<1, 1, 0, st>>>((unsigned char *)d, nw * 8, n % 8, key, w0);
    return launched(err, "counter_fill");
}

extern "C" fhr_status fhk_counter_fill(fhr_stream *s, void *d, size_t n, uint64_t key,
                                       fhr_error *err)
{
    return fhk_counter_fill_at(s, d, n, key, 0, err);
}

extern "C" fhr_status fhk_counter_verify(fhr_stream *s, const void *d, size_t n, uint64_t key,
                                         unsigned long long *mismatches, fhr_error *err)
{
    return fhk_counter_verify_at(s, d, n, key, 0, mismatches, err);
}

extern "C" fhr_status fhk_counter_verify_at(fhr_stream *s, const void *d, size_t n, uint64_t key,
                                            uint64_t w0, unsigned long long *mismatches,
                                            fhr_error *err)
{
    cudaStream_t st = native(s);
    size_t nw = n / 8;
    k_counter_verify<<<grid_for(nw), 256, 0, st>>>((const uint64_t *)d, nw,
                                                   (const unsigned char *)d + nw * 8, n % 8, key,
                                                   w0, mismatches + 1);
    k_verify_fold<<<1, 1, 0, st>>>(mismatches + 1, mismatches);
    return launched(err, "counter_verify");
}
