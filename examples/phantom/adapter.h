/* examples/phantom/adapter.h — the C face of our Phantom adapter (adapter.cu): a CKKS context
 * with 180 MiB rotation keys, key export and binding, and the BSGS linear transform cut
 * into key uses, so that a C driver can stream the keys through fheplan. */
#ifndef FHEPLAN_EXAMPLE_PHANTOM_ADAPTER_H
#define FHEPLAN_EXAMPLE_PHANTOM_ADAPTER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PH_N1 8                         /* baby steps 1..N1-1 */
#define PH_N2 8                         /* giant steps N1*j, j = 1..N2-1 */
#define PH_KEYS ((PH_N1 - 1) + (PH_N2 - 1)) /* 14 rotation keys */
#define PH_USES PH_KEYS                 /* one use per key and pass */
#define PH_PASSES 2

typedef struct ph_engine ph_engine;

/* N = 2^16, Q = 60 + 29 x 40 bits, P = 6 x 60 (dnum 5), rotation keys for the baby and
 * giant steps, nct ciphertexts of random slots and a random matrix of N1*N2 diagonals
 * (seeded). Returns 0, or -1 with msg filled. */
int ph_create(int nct, uint64_t seed, ph_engine **out, char *msg, size_t cap);
void ph_destroy(ph_engine *e);

size_t ph_key_bytes(const ph_engine *e); /* dnum parts, each [b | a] of QP*N words */
int ph_key_step(int k);                  /* rotation step of key k */
/* The key used by use u of pass p (pass 0 baby steps first, pass 1 giant steps first in
 * reverse, so that a pass starts with the keys the previous one ended with). */
int ph_use_key(int pass, int u);

/* Copies key k (as Phantom made it) into dst (pinned host memory, ph_key_bytes). */
int ph_export_key(ph_engine *e, int k, void *dst, char *msg, size_t cap);

/* ---- seeded keys: each part's a half is Phantom's uniform sample from a 64-byte seed --- */
#define PH_SEED_BYTES 64   /* Phantom's prng_seed_byte_count */
#define PH_MAX_PARTS 8
size_t ph_key_parts(const ph_engine *e); /* dnum */
size_t ph_half_bytes(const ph_engine *e); /* one half of one part: QP*N words */
/* Copies key k's b halves into b_dst (ph_key_parts halves, part i at i*ph_half_bytes) and
 * the seed each part's a half was sampled from at key generation into seeds
 * (PH_SEED_BYTES per part, through the patched accessor part_seed_a). */
int ph_export_seeded(ph_engine *e, int k, void *b_dst, uint8_t *seeds, char *msg, size_t cap);
/* Phantom's own sampler (sample_uniform_poly_wrap over the key context, all QP moduli):
 * writes one a half (nbytes == ph_half_bytes) at device address dst from a seed of
 * PH_SEED_BYTES host bytes, enqueued on `stream` (a cudaStream_t) only, never waiting.
 * Thread-safe. */
int ph_sample_a(ph_engine *e, void *stream, void *dst, size_t nbytes, const void *seed,
                size_t seed_len, char *msg, size_t cap);
/* Phantom's sampler into a device scratch buffer, one key's a halves at a time on a
 * stream of its own: bytes per second, best of reps. */
int ph_sample_rate(ph_engine *e, const uint8_t *seeds, int reps, double *bytes_per_s,
                   char *msg, size_t cap);
/* Keeps a device copy of every key's a halves as Phantom generated them (before
 * ph_release_keys), for ph_verify_a. */
int ph_keep_reference(ph_engine *e, char *msg, size_t cap);
/* Enqueues on cudaStreamPerThread a word-by-word comparison of the a halves of a device
 * key laid out as ph_export_key writes it with Phantom's own (ph_keep_reference),
 * counting the differing words of key k. */
int ph_verify_a(ph_engine *e, int k, const void *device_key, char *msg, size_t cap);
/* Waits for cudaStreamPerThread, then the differing words counted per key since the
 * last call (and resets the counts). */
int ph_verify_counts(ph_engine *e, uint64_t mismatches[PH_KEYS], char *msg, size_t cap);
/* Frees Phantom's own key parts (the patched accessor); the pointer tables stay. */
int ph_release_keys(ph_engine *e, char *msg, size_t cap);
/* Points key k's table at a device copy laid out as ph_export_key writes it, in stream
 * order on cudaStreamPerThread (a one-thread kernel: no host wait). */
int ph_bind_key(ph_engine *e, int k, const void *device, char *msg, size_t cap);

/* The transform, on cudaStreamPerThread of the calling thread, never synchronising the
 * host: ph_pass_begin, then for u = 0..PH_USES-1 ph_pass_use (the rotations that read key
 * ph_use_key(pass, u), bound before) and ph_pass_after_use (the plaintext products that
 * follow them and read no key, so the key's lease may end before), then ph_pass_end.
 * Pass 0 starts from the encrypted inputs, pass 1 from pass 0's outputs. */
int ph_pass_begin(ph_engine *e, int pass, char *msg, size_t cap);
int ph_pass_use(ph_engine *e, int pass, int u, char *msg, size_t cap);
int ph_pass_after_use(ph_engine *e, int pass, char *msg, size_t cap);
int ph_pass_end(ph_engine *e, int pass, char *msg, size_t cap);

/* Waits for cudaStreamPerThread (end of a timed region). */
int ph_sync(char *msg, size_t cap);

/* The result ciphertexts' words (all of them, every ciphertext) copied to host memory that
 * the caller frees with free(); *nwords their count. */
int ph_results(ph_engine *e, uint64_t **words, size_t *nwords, char *msg, size_t cap);
/* Decrypts and decodes the results; the largest distance of any slot from the transform
 * applied twice in double precision on the host. */
int ph_check_slots(ph_engine *e, double *max_err, char *msg, size_t cap);
/* Encrypt, decrypt and decode a vector (Phantom issue #21: CKKS decoding in Release
 * builds); the largest error. */
int ph_selftest(ph_engine *e, double *max_err, char *msg, size_t cap);

/* Pinned host -> device bandwidth, bytes per second, over nbytes copies (best of reps). */
int ph_pinned_bandwidth(size_t nbytes, int reps, double *bytes_per_s, char *msg, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
