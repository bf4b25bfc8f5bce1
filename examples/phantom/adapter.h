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
