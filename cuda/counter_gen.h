/* cuda/counter_gen.h — the built-in counter-based generator of regenerable fields, one
 * definition compiled for the host (counter_gen.c) and the GPU (kernels.cu). */
#ifndef FHEPLAN_CUDA_COUNTER_GEN_H
#define FHEPLAN_CUDA_COUNTER_GEN_H

#include "fheplan/backend.h"

#ifdef __CUDACC__
#define FHR_HD __host__ __device__ __forceinline__
#else
#define FHR_HD static inline
#endif

/* One round of the mixer (a bijection of 64-bit words). */
FHR_HD uint64_t fhr_counter_mix(uint64_t z)
{
    z = (z ^ (z >> 32)) * 0xD6E8FEB86659FD93ULL;
    z = (z ^ (z >> 32)) * 0xD6E8FEB86659FD93ULL;
    return z ^ (z >> 32);
}

/* Word i of the stream keyed by `key`: byte k of a generated field is byte k % 8 (little
 * endian) of fhr_counter_word(key, k / 8). No state: any word is computed on its own. */
FHR_HD uint64_t fhr_counter_word(uint64_t key, uint64_t i)
{
    return fhr_counter_mix(key ^ fhr_counter_mix(i * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL));
}

#undef FHR_HD

/* The key of a seed: every seed byte folded in order (little-endian 8-byte groups, the
 * last one zero-padded), then the length. Host only. */
uint64_t fhr_counter_key(const void *seed, size_t len);
/* Writes n bytes of the stream keyed by `key` at p (host memory), on several threads for
 * large fields. */
void fhr_counter_fill_host(void *p, size_t n, uint64_t key);
/* 1 when the n bytes at p differ from the stream keyed by `key`. */
int fhr_counter_differs_host(const void *p, size_t n, uint64_t key);
/* The same for bytes [offset, offset + n) of the stream (offset a multiple of 8). */
void fhr_counter_fill_host_at(void *p, size_t n, uint64_t key, uint64_t offset);
int fhr_counter_differs_host_at(const void *p, size_t n, uint64_t key, uint64_t offset);

/* Enqueues the fill of n bytes at dst (memory at `at` of backend b) on s: a kernel on
 * real CUDA memory, a host function on the emulated device and host memory, nothing on
 * the model backend (its memory is not real). */
fhr_status fhr_counter_generate(fhr_backend *b, fhr_location at, fhr_stream *s, void *dst,
                                size_t n, uint64_t key, fhr_error *err);
/* The same for bytes [offset, offset + n) of the stream (offset a multiple of 8). */
fhr_status fhr_counter_generate_at(fhr_backend *b, fhr_location at, fhr_stream *s, void *dst,
                                   size_t n, uint64_t key, uint64_t offset, fhr_error *err);
/* The name of the backend that owns the memory: a fault decorator answers its inner
 * backend's (fault.c). */
const char *fhr_backend_kind(fhr_backend *b);

#endif
