/* examples/cheddar/adapter.h — the C face of our adapter over Cheddar's CKKS bootstrapping
 * (a user's Cheddar tree, patched at build time by patch-cheddar.sh; nothing of Cheddar is
 * in this repository). The adapter is C++ (adapter.cu); boot.c, the driver, is C and talks
 * to fheplan's VM. Every call returns 0, or -1 with a message in msg.
 *
 * The bootstrap is cut into phases, the order of Cheddar's own Boot: "modup" (scale-up,
 * ModUpToMax with the dense-to-sparse and sparse-to-dense keys); for each CoeffToSlot
 * linear transform (one per level) "cts0b" (its baby steps: one fused kernel reads every
 * baby-step key at once) and its giant steps, one phase per giant-step key: "cts0g1"
 * (the plaintext diagonals accumulated over the baby steps, then the first giant-step
 * key), "cts0g2", ... (one key each; the last one ends the transform with its mod-down),
 * and so on to cts3; "evalmod" (conjugation and the
 * modular reduction: the conjugation and multiplication keys); then "stc0b".."stc2g" for
 * SlotToCoeff. The giant steps are Cheddar's own sequence replayed one key at a time
 * (the fused plaintext accumulation, then per key a mod-down, mod-up, key multiplication
 * and rotation into the accumulator, then the closing accumulation and mod-down), so the
 * results stay bit-identical while a phase holds one giant-step key instead of all of
 * them. A transform whose giant steps take another of Cheddar's paths keeps one giant-step
 * phase ("cts0g").
 * A phase runs for the whole batch before the next starts, so a key leased for a phase
 * serves every ciphertext of the batch. The keys and the linear transforms' plaintext
 * diagonals are the engine values: the driver exports them to pinned host memory and the
 * VM copies a phase's ones onto the device for it; a phase kernel binds the leased device
 * memory to Cheddar's key and plaintext objects (a memory resource of ours hands out the
 * leased addresses while those objects are built) and runs Cheddar's code on them. */
#ifndef FHEPLAN_EXAMPLE_CHEDDAR_ADAPTER_H
#define FHEPLAN_EXAMPLE_CHEDDAR_ADAPTER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ch_engine ch_engine;

#define CH_MAX_PHASES 64
#define CH_MAX_PARTS 32

/* A key's polynomials are its q-limbs (terminal primes, then main primes) followed by its
 * special (auxiliary) limbs; part i covers q-limbs [i * alpha, (i + 1) * alpha). A key
 * switch at a lower level reads, of the parts its level reaches, a q-limb prefix and every
 * special limb: fheplan's limbs(q, special, beta, alpha) cut. */
typedef struct ch_key_info {
    int index;          /* Cheddar's EvkMap index: a rotation distance or a special index */
    char name[24];      /* "rot5", "conj", "mult", "dts", "std" */
    int beta;           /* parts: fields b0 a0 b1 a1 ... */
    uint64_t part_bytes;/* one half of one part */
    uint64_t bytes;     /* 2 * beta * part_bytes */
    int q;              /* q-limbs of each polynomial (4 terminal + the main primes) */
    int special;        /* special limbs of each polynomial */
    int alpha;          /* q-limbs per part: beta = ceil(q / alpha) */
    uint64_t limb_bytes;/* one limb: the degree times the word */
} ch_key_info;

/* The plaintext diagonals of one linear transform: read together by its giant steps (one
 * fused kernel takes all their addresses), so they are one value, the diagonals back to
 * back in the transform's [giant step][baby step] order. */
typedef struct ch_pt_info {
    int phase;          /* the giant-step phase that reads them */
    int ndiag;
    uint64_t diag_bytes;/* every diagonal of a transform has the same size */
    uint64_t bytes;     /* ndiag * diag_bytes */
} ch_pt_info;

typedef struct ch_phase_info {
    char name[16];
    int nkeys, npts;
    const int *keys;    /* indices into the key catalogue, in the order the phase reads them */
    const int *pts;     /* indices into the plaintext catalogue (at most one group) */
    int level;          /* Cheddar's level index of the phase's key switches (modup: the
                           maximum level; its keys are read whole) */
    const int *limbs;   /* per key: the q-limbs the phase reads (4 + the main primes of
                           its level), at most the key's q; the key's q: read whole */
} ch_phase_info;

/* The device copy of a key a phase reads: its fields, each field_bytes ((held q-limbs +
 * special) limbs), 2 * held parts of them (b0 a0 b1 a1 ...), wherever each one lies (a
 * partial copy keeps each part in a buffer of its own). */
#define CH_KEY_FIELDS 32
typedef struct ch_key_copy {
    void *field[CH_KEY_FIELDS];
    uint64_t field_bytes;
    int nfields;
} ch_key_copy;

/* Cheddar's CKKS context for the parameter file (bootparam_40.json), bootstrapping
 * prepared for full slots, every key of a bootstrap generated on the device (Cheddar's own
 * key generation, on the host: the slow part), and batch_max messages encrypted at level 0.
 * Installs the binding memory resource over Cheddar's pool. */
int ch_create(const char *param_json, int batch_max, ch_engine **out, char *msg, size_t n);
void ch_destroy(ch_engine *e);

int ch_nkeys(const ch_engine *e);
const ch_key_info *ch_key(const ch_engine *e, int k);
int ch_npts(const ch_engine *e);
const ch_pt_info *ch_pt(const ch_engine *e, int p);
int ch_nphases(const ch_engine *e);
const ch_phase_info *ch_phase(const ch_engine *e, int ph);
int ch_word_bytes(const ch_engine *e);

/* Cheddar's own Boot, every key resident, of inputs 0..B-1: the reference each run is
 * compared with (kept on the host), and its time for B ciphertexts (ms, by events). */
int ch_reference(ch_engine *e, int B, double *ms, char *msg, size_t n);

/* The phase-by-phase bootstrap of inputs 0..B-1 with every key (and plaintext) resident in
 * Cheddar's own objects: the batch time (ms, by events, on Cheddar's stream). Checks the
 * results against the reference word for word (*identical) and per phase time (ms,
 * phase_ms[ch_nphases]). */
int ch_resident_batch(ch_engine *e, int B, double *ms, double *phase_ms, int *identical,
                      char *msg, size_t n);

/* Copies every key (and, with pts, every plaintext diagonal) into pinned host memory and
 * frees Cheddar's device copies: from then on phases read only what the VM binds. */
int ch_export_keys(ch_engine *e, char *msg, size_t n);
int ch_export_pts(ch_engine *e, char *msg, size_t n);
int ch_pts_exported(const ch_engine *e);

/* Fills a device copy of key k (or plaintext p) from the pinned export on stream s (a
 * cudaStream_t), asynchronously. */
int ch_load_key(ch_engine *e, int k, void *dst, uint64_t nbytes, void *stream, char *msg,
                size_t n);
/* Fills one field of a copy of key k holding held_q q-limbs (1..q): half `field` of the
 * export (2 * part, + 1 for the a half), its q-limbs 0..held_q-1 then its special limbs,
 * packed, on stream s (NULL: before returning). dst may be host or device memory. */
int ch_load_key_field(ch_engine *e, int k, int field, int held_q, void *dst, void *stream,
                      char *msg, size_t n);
int ch_load_pt(ch_engine *e, int p, void *dst, uint64_t nbytes, void *stream, char *msg,
               size_t n);

/* Batch control on Cheddar's stream: begin copies inputs 0..B-1 into the working
 * ciphertexts; end checks the results against the reference (after a synchronisation). */
int ch_batch_begin(ch_engine *e, int B, char *msg, size_t n);
int ch_batch_identical(ch_engine *e, int B, int *identical, char *msg, size_t n);

/* Runs phase ph for the batch of B, reading the keys and plaintexts at the device
 * addresses given (keys[i] for the phase's i-th key, whole or partial: bound as a key of
 * the q-limbs and parts it holds, which must cover what the phase reads; pt_ptr[j] for
 * diagonal j of the phase's plaintext group). Before the export, Cheddar's own resident
 * copies serve and the copies are not read. Enqueues on Cheddar's stream (the legacy
 * default stream). */
int ch_run_phase(ch_engine *e, int ph, int B, const ch_key_copy *keys, void *const *pt_ptr,
                 char *msg, size_t n);

/* Seeded keys. Cheddar's key generation draws each part's a half from our sampler (a
 * counter-based hash of the key's index, the part, the prime and the coefficient, reduced
 * modulo the prime: uniform, as Cheddar's own draw), so the device can regenerate any a
 * half from (key, part) alone. ch_seeded_parts lists the parts of key k whose a half is
 * regenerable (all but the sparse-to-dense key's part 0, which key generation overwrites
 * with the sum of the parts); ch_sample_a writes part's a half on stream s;
 * ch_verify_sampler regenerates every regenerable a half and compares it with the export
 * word by word (*mismatched: differing words). */
int ch_seeded_parts(const ch_engine *e, int k, int *parts, int max);
int ch_sample_a(ch_engine *e, int k, int part, void *dst, uint64_t nbytes, void *stream,
                char *msg, size_t n);
/* Bytes [offset, offset + nbytes) of part's a half (both multiples of the word): the
 * words the whole half has there, word w of the half being coefficient w % degree of the
 * key's limb slot w / degree (q-limbs 0..q-1, then the special limbs), so a partial
 * copy's limbs come out as the full key has them. */
int ch_sample_a_range(ch_engine *e, int k, int part, void *dst, uint64_t nbytes,
                      uint64_t offset, void *stream, char *msg, size_t n);
/* Regenerates every regenerable a half whole (*mismatched of *checked words differ from
 * the export) and by range (*range_mismatched of *range_checked): as each partial copy
 * the phases need lays it out (q-limbs 0..n-1 then the special limbs), and one range
 * that starts and ends inside limbs. */
int ch_verify_sampler(ch_engine *e, uint64_t *mismatched, uint64_t *checked,
                      uint64_t *range_mismatched, uint64_t *range_checked, char *msg,
                      size_t n);
/* The pinned export of key k (2 * beta halves of part_bytes, b0 a0 b1 a1 ...). */
const void *ch_key_host(const ch_engine *e, int k);

/* Min-KS: Cheddar's Boot with minimum key switching (min_ks true: each transform's baby
 * and giant steps chain one stride key each) on inputs 0..B-1, every key resident (the
 * full map holds every key it reads), its time for B ciphertexts (ms, by events); the
 * results stay in the batch's outputs for ch_result_error. Before the export. */
int ch_minks(ch_engine *e, int B, double *ms, char *msg, size_t n);
/* The keys Min-KS reads (its stride keys, then the basic keys that Boot reads: conj,
 * mult, dts, std): their catalogue indices (at most max) and count; *own_bytes: what
 * they would hold generated for Min-KS alone (each stride key at the highest level Min-KS
 * asks it for, as Cheddar's key generation sizes it). */
int ch_minks_keys(const ch_engine *e, int *keys, int max, uint64_t *own_bytes);

/* Decrypts result 0 of the last batch and compares it with the message (Cheddar's test's
 * measure): the SNR in dB-free form (signal power / error power) and the largest error. */
int ch_result_error(ch_engine *e, double *snr, double *max_err, char *msg, size_t n);

/* Cheddar's device memory through its pool: bytes outstanding now and the high-water mark
 * since the last reset (the binding resource counts what it forwards). */
void ch_pool_marks(const ch_engine *e, uint64_t *now, uint64_t *peak);
void ch_pool_reset_peak(ch_engine *e);

#ifdef __cplusplus
}
#endif

#endif
