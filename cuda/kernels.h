/* cuda/kernels.h — the C ABI of the built-in rehearsal kernels on CUDA (kernels.cu):
 * synthetic fill, touch, verify, spin and the key-switch multiply-accumulate. Each
 * call enqueues on the given fhr_stream of the CUDA backend and returns at once.
 * In a build without CUDA every call fails with FHR_E_UNSUPPORTED (kernels_stub.c). */
#ifndef FHEPLAN_CUDA_KERNELS_H
#define FHEPLAN_CUDA_KERNELS_H

#include "fheplan/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Native stream and device of a CUDA-backend stream (cuda_backend.c). */
void *fhr_cuda_stream_native(fhr_stream *s, int *dev);

/* The modulus of the key-switch multiply-accumulate (a 31-bit prime). */
#define FHK_MODULUS 2147483647ULL

/* Fills n bytes at d with rplan_synth_word(seed, ...). */
fhr_status fhk_synth_fill(fhr_stream *s, void *d, size_t n, uint64_t seed, fhr_error *err);
/* Sets n bytes at d to zero. */
fhr_status fhk_zero(fhr_stream *s, void *d, size_t n, fhr_error *err);
/* Reads every byte of d and xors the words into *sink (device memory). */
fhr_status fhk_touch(fhr_stream *s, const void *d, size_t n, uint64_t *sink, fhr_error *err);
/* Compares n bytes at d against the expected content (synth: 1 with seed; zero: 0) and
 * adds 1 to *mismatches (device memory) when any byte differs. */
fhr_status fhk_verify(fhr_stream *s, const void *d, size_t n, int synth, uint64_t seed,
                      unsigned long long *mismatches, fhr_error *err);
/* Busy-waits ns nanoseconds on the device (one block). */
fhr_status fhk_spin(fhr_stream *s, uint64_t ns, fhr_error *err);
/* acc[j] = sum over key words i with i % nacc == j of ct[j % nct] * key[i] mod FHK_MODULUS,
 * `repeat` times (batched ciphertexts). Sizes in 64-bit words. */
fhr_status fhk_keyswitch(fhr_stream *s, const uint64_t *ct, size_t nct, const uint64_t *key,
                         size_t nkey, uint64_t *acc, size_t nacc, uint32_t repeat,
                         fhr_error *err);

/* The built-in counter generator (counter_gen.h): fills n bytes at d with the stream
 * keyed by `key`, or compares them against it and adds 1 to *mismatches (device memory,
 * two words as for fhk_verify) when any byte differs. */
fhr_status fhk_counter_fill(fhr_stream *s, void *d, size_t n, uint64_t key, fhr_error *err);
/* The same from word w0 of the stream on (bytes 8 * w0 on). */
fhr_status fhk_counter_fill_at(fhr_stream *s, void *d, size_t n, uint64_t key, uint64_t w0,
                               fhr_error *err);
fhr_status fhk_counter_verify(fhr_stream *s, const void *d, size_t n, uint64_t key,
                              unsigned long long *mismatches, fhr_error *err);
/* fhk_verify and fhk_counter_verify of the stream from word w0 on (the bytes of a value or
 * field from byte 8 * w0 on: a partial copy's limbs). */
fhr_status fhk_verify_at(fhr_stream *s, const void *d, size_t n, int synth, uint64_t seed,
                         uint64_t w0, unsigned long long *mismatches, fhr_error *err);
fhr_status fhk_counter_verify_at(fhr_stream *s, const void *d, size_t n, uint64_t key,
                                 uint64_t w0, unsigned long long *mismatches, fhr_error *err);

#ifdef __cplusplus
}
#endif
#endif
