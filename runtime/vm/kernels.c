/* runtime/vm/kernels.c — the body kernel registry and the built-in rehearsal kernels:
 * touch (reads every byte), verify (recomputes synthetic or zero content and counts
 * values that differ), spin(duration) (modelled compute) and ckks.keyswitch(ct, key
 * [, batch]) (a modular multiply-accumulate over every word of the key into a scratch
 * accumulator of the ciphertext's size, repeated `batch` times). On a virtual clock
 * (the emulated device's) spin runs nothing, and every body's stream advances by the kernel
 * model's time for it (body.c), whatever the host job really takes. On real CUDA memory
 * they launch the kernels of cuda/kernels.cu; elsewhere (the emulated device, host and
 * pinned copies) they run as host functions enqueued on the stream, so stream order
 * holds either way. verify also recomputes a seeded value's regenerated "a" half (the
 * built-in counter generator). Also: the one synthetic-data fill used by adoption and sources. */
#include "runtime/vm/internal.h"
#include "base/error.h"
#include "cuda/kernels.h"
#include "cuda/counter_gen.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- registry ---------------------------------------------------------------------- */

fhr_status rplan_kernel_register(rplan_vm *vm, const char *name, rplan_kernel_fn fn, void *ctx,
                                 fhr_error *err)
{
    if (!vm || !name || !*name || !fn)
        return fhr_fail(err, FHR_E_INVALID, "kernel_register: NULL vm, name or function");
    for (size_t i = 0; i < vm->nkerns; i++)
        if (strcmp(vm->kerns[i].name, name) == 0) {
            vm->kerns[i].fn = fn;
            vm->kerns[i].ctx = ctx;
            return FHR_OK;
        }
    if (vm->nkerns == vm->capkerns) {
        size_t cap = vm->capkerns ? vm->capkerns * 2 : 8;
        vm_kernel *n = realloc(vm->kerns, cap * sizeof *n);
        if (!n)
            return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        vm->kerns = n;
        vm->capkerns = cap;
    }
    char *nm = strdup(name);
    if (!nm)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    vm->kerns[vm->nkerns].name = nm;
    vm->kerns[vm->nkerns].fn = fn;
    vm->kerns[vm->nkerns].ctx = ctx;
    vm->nkerns++;
    return FHR_OK;
}

const vm_kernel *vm_find_kernel(const rplan_vm *vm, const char *name)
{
    for (size_t i = 0; i < vm->nkerns; i++)
        if (strcmp(vm->kerns[i].name, name) == 0)
            return &vm->kerns[i];
    return NULL;
}

/* ---- synthetic data ------------------------------------------------------------------- */

static void synth_range(unsigned char *p, size_t off, size_t end, uint64_t seed)
{
    /* off is a multiple of 8 */
    size_t w = off / 8;
    for (; off + 8 <= end; off += 8, w++) {
        uint64_t x = rplan_synth_word(seed, w);
        memcpy(p + off, &x, 8);
    }
    if (off < end) {
        uint64_t x = rplan_synth_word(seed, w);
        for (size_t k = 0; off + k < end; k++)
            p[off + k] = (unsigned char)(x >> (8 * k));
    }
}

typedef struct synth_part {
    unsigned char *p;
    size_t off, end;
    uint64_t seed;
} synth_part;

static void *synth_thread(void *arg)
{
    synth_part *sp = arg;
    synth_range(sp->p, sp->off, sp->end, sp->seed);
    return NULL;
}

void vm_synth_host(void *p, size_t n, uint64_t seed)
{
    enum { NT = 8 };
    if (n < ((size_t)64 << 20)) {
        synth_range(p, 0, n, seed);
        return;
    }
    pthread_t th[NT];
    synth_part parts[NT];
    int started[NT] = {0};
    size_t chunk = (n / NT + 7) / 8 * 8;
    for (int i = 0; i < NT; i++) {
        size_t off = (size_t)i * chunk, end = off + chunk < n ? off + chunk : n;
        parts[i] = (synth_part){p, off < n ? off : n, end, seed};
        started[i] = pthread_create(&th[i], NULL, synth_thread, &parts[i]) == 0;
        if (!started[i])
            synth_thread(&parts[i]);
    }
    for (int i = 0; i < NT; i++)
        if (started[i])
            pthread_join(th[i], NULL);
}

/* 1 when bytes [off, end) of p differ from the synthetic (or zero) content, whose word w0
 * is at p. */
static int verify_range(const unsigned char *p, size_t off, size_t end, int synth, uint64_t seed,
                        uint64_t w0)
{
    uint64_t w = w0 + off / 8;
    for (; off + 8 <= end; off += 8, w++) {
        uint64_t x, want = synth ? rplan_synth_word(seed, w) : 0;
        memcpy(&x, p + off, 8);
        if (x != want)
            return 1;
    }
    if (off < end) {
        uint64_t want = synth ? rplan_synth_word(seed, w) : 0;
        for (size_t k = 0; off + k < end; k++)
            if (p[off + k] != (unsigned char)(want >> (8 * k)))
                return 1;
    }
    return 0;
}

typedef struct verify_part {
    const unsigned char *p;
    size_t off, end;
    int synth, bad;
    uint64_t seed, w0;
} verify_part;

static void *verify_thread(void *arg)
{
    verify_part *vp = arg;
    vp->bad = verify_range(vp->p, vp->off, vp->end, vp->synth, vp->seed, vp->w0);
    return NULL;
}

/* Recomputes and compares, on several threads for large values. */
static int verify_host(const unsigned char *p, size_t n, int synth, uint64_t seed, uint64_t w0)
{
    enum { NT = 8 };
    if (n < ((size_t)8 << 20))
        return verify_range(p, 0, n, synth, seed, w0);
    pthread_t th[NT];
    verify_part parts[NT];
    int started[NT] = {0}, bad = 0;
    size_t chunk = (n / NT + 7) / 8 * 8;
    for (int i = 0; i < NT; i++) {
        size_t off = (size_t)i * chunk, end = off + chunk < n ? off + chunk : n;
        parts[i] = (verify_part){p, off < n ? off : n, end, synth, 0, seed, w0};
        started[i] = pthread_create(&th[i], NULL, verify_thread, &parts[i]) == 0;
        if (!started[i])
            verify_thread(&parts[i]);
    }
    for (int i = 0; i < NT; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        bad |= parts[i].bad;
    }
    return bad;
}

/* ---- host jobs (run on a stream through launch_host; each frees itself) ------------- */

enum { JOB_FILL, JOB_TOUCH, JOB_VERIFY, JOB_SPIN, JOB_KEYSWITCH, JOB_VERIFY_COUNTER };

typedef struct host_job {
    int kind;
    unsigned char *dst;
    const unsigned char *src;
    size_t n;
    int synth;               /* FILL/VERIFY: 1 synth, 0 zero; FILL: 2 copy from src */
    uint64_t seed;
    uint64_t *counter;       /* VERIFY: mismatches; TOUCH: sink */
    uint64_t w0;             /* VERIFY: the content's word at src */
    uint64_t ns;             /* SPIN */
    const uint64_t *ct, *key;
    uint64_t *acc;
    size_t nct, nkey, nacc;
    uint32_t repeat;
} host_job;

static void run_job(void *arg)
{
    host_job *j = arg;
    switch (j->kind) {
    case JOB_FILL:
        if (j->synth == 2)
            memcpy(j->dst, j->src, j->n);
        else if (j->synth == 1)
            vm_synth_host(j->dst, j->n, j->seed);
        else
            memset(j->dst, 0, j->n);
        break;
    case JOB_TOUCH: {
        uint64_t acc = 0;
        for (size_t i = 0; i < j->n; i++)
            acc = acc * 31 + j->src[i];
        __atomic_fetch_xor(j->counter, acc, __ATOMIC_RELAXED);
        break;
    }
    case JOB_VERIFY:
        if (verify_host(j->src, j->n, j->synth, j->seed, j->w0))
            __atomic_fetch_add(j->counter, 1, __ATOMIC_RELAXED);
        break;
    case JOB_VERIFY_COUNTER: /* seed: the generator's key */
        if (fhr_counter_differs_host_at(j->src, j->n, j->seed, 8 * j->w0))
            __atomic_fetch_add(j->counter, 1, __ATOMIC_RELAXED);
        break;
    case JOB_SPIN: {
        struct timespec ts = {(time_t)(j->ns / 1000000000ULL), (long)(j->ns % 1000000000ULL)};
        while (nanosleep(&ts, &ts) != 0)
            ;
        break;
    }
    case JOB_KEYSWITCH: {
        const uint64_t q = FHK_MODULUS;
        for (uint32_t r = 0; r < j->repeat; r++)
            for (size_t a = 0; a < j->nacc; a++) {
                uint64_t s = j->acc[a] % q, c = j->ct[a % j->nct] % q;
                for (size_t i = a; i < j->nkey; i += j->nacc)
                    s = (s + c * (j->key[i] % q)) % q;
                j->acc[a] = s;
            }
        break;
    }
    }
    free(j);
}

static fhr_status enqueue(fhr_backend *b, fhr_stream *s, host_job *j, fhr_error *err)
{
    fhr_status st = b->ops->launch_host(b, s, run_job, j, err);
    if (st)
        free(j);
    return st;
}

static host_job *new_job(int kind, fhr_error *err)
{
    host_job *j = calloc(1, sizeof *j);
    if (!j)
        fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    else
        j->kind = kind;
    return j;
}

fhr_status vm_fill(rplan_vm *vm, void *p, fhr_location loc, size_t n, const rplan_value_info *vi,
                   const void *from, fhr_stream *s, fhr_error *err)
{
    int synth = from ? 2 : vi && vi->data == RPLAN_DATA_SYNTH ? 1 : 0;
    uint64_t seed = vi ? vi->seed : 0;
    if (vm->explain)
        return FHR_OK;
    if (loc.kind != FHR_LOC_CUDA) {
        if (synth == 2)
            memcpy(p, from, n);
        else if (synth == 1)
            vm_synth_host(p, n, seed);
        else
            memset(p, 0, n);
        return FHR_OK;
    }
    fhr_status st;
    if (vm->is_cuda) {
        if (synth == 2)
            st = vm->b->ops->copy(vm->b, p, loc, from, fhr_loc_host(), n, s, err);
        else if (synth == 1)
            st = fhk_synth_fill(s, p, n, seed, err);
        else
            st = fhk_zero(s, p, n, err);
    } else {
        host_job *j = new_job(JOB_FILL, err);
        if (!j)
            return FHR_E_NOMEM;
        j->dst = p;
        j->src = from;
        j->n = n;
        j->synth = synth;
        j->seed = seed;
        st = enqueue(vm->b, s, j, err);
    }
    if (st == FHR_OK)
        st = vm->b->ops->stream_sync(vm->b, s, err);
    return st;
}

/* ---- built-in kernels ---------------------------------------------------------------- */

/* The bytes a kernel reads: field "data", else field 0 and the fields stored right after it
 * (a seeded key's "b" then "a": the whole key where both are held). */
/* The run of value v's bytes that starts at field *f (its "data" field, or fields back to
 * back from *f on), *f moved past it; 0 bytes once every field is read. A copy of a cut
 * value lies one buffer per part, so its fields are several runs. */
static fhr_status value_run(const rplan_kernel_call *c, size_t v, size_t *f, const void **p,
                            size_t *n, fhr_error *err)
{
    void *q = NULL;
    size_t nf = fhr_value_nfields(c->values[v]);
    *n = 0;
    if (*f == 0 && fhr_value_field(c->values[v], "data", &q, n) == FHR_OK) {
        *f = nf;
    } else if (*f < nf) {
        if (fhr_value_field_at(c->values[v], (*f)++, &q, n) != FHR_OK)
            return fhr_fail(err, FHR_E_INVALID, "value %s has no field", c->infos[v]->name);
        for (; *f < nf; ++*f) {
            void *r;
            size_t rn;
            if (fhr_value_field_at(c->values[v], *f, &r, &rn) != FHR_OK ||
                (char *)r != (char *)q + *n)
                break;
            *n += rn;
        }
    } else if (nf == 0) {
        return fhr_fail(err, FHR_E_INVALID, "value %s has no field", c->infos[v]->name);
    }
    *p = q;
    return FHR_OK;
}

/* Value v's first run of bytes (value_run). */
static fhr_status value_bytes(const rplan_kernel_call *c, size_t v, const void **p, size_t *n,
                              fhr_error *err)
{
    size_t f = 0;
    return value_run(c, v, &f, p, n, err);
}

static uint64_t *counter_of(const rplan_kernel_call *c)
{
    return c->vm->counter[fhr_loc_slot(c->loc)];
}

/* The key of a seeded value's counter stream (its 8 little-endian seed bytes). */
static uint64_t seeded_key(const rplan_value_info *vi)
{
    unsigned char seed[8];
    for (int k = 0; k < 8; k++)
        seed[k] = (unsigned char)(vi->regen_seed >> (8 * k));
    return fhr_counter_key(seed, sizeof seed);
}

/* Enqueues the check of one byte range against synthetic/zero content (counter 0) or the
 * counter stream keyed by `key` (counter 1). */
/* Compares n bytes at p with the content from byte `off` on (a multiple of 8): synthetic
 * or zero content, or (counter) the counter generator's stream keyed by seed. */
static fhr_status verify_range_on(const rplan_kernel_call *c, const void *p, size_t n,
                                  int counter, int synth, uint64_t seed, uint64_t off,
                                  fhr_error *err)
{
    if (c->device_memory)
        return counter ? fhk_counter_verify_at(c->stream, p, n, seed, off / 8,
                                               (unsigned long long *)counter_of(c), err)
                       : fhk_verify_at(c->stream, p, n, synth, seed, off / 8,
                                       (unsigned long long *)counter_of(c), err);
    host_job *j = new_job(counter ? JOB_VERIFY_COUNTER : JOB_VERIFY, err);
    if (!j)
        return FHR_E_NOMEM;
    j->src = p;
    j->n = n;
    j->synth = synth;
    j->seed = seed;
    j->w0 = off / 8;
    j->counter = counter_of(c);
    return enqueue(c->backend, c->stream, j, err);
}


/* touch of one run of bytes: its words summed into the body's scratch counter. */
static fhr_status touch_run(const rplan_kernel_call *c, const void *p, size_t n, fhr_error *err)
{
    if (c->device_memory)
        return fhk_touch(c->stream, p, n, (uint64_t *)c->scratch, err);
    host_job *j = new_job(JOB_TOUCH, err);
    if (!j)
        return FHR_E_NOMEM;
    j->src = p;
    j->n = n;
    j->counter = (uint64_t *)c->scratch;
    return enqueue(c->backend, c->stream, j, err);
}

fhr_status vm_touch_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)ctx;
    for (size_t v = 0; v < c->nvalues; v++) {
        const void *p;
        size_t n, f = 0;
        fhr_status st;
        while ((st = value_run(c, v, &f, &p, &n, err)) == FHR_OK && n)
            if ((st = touch_run(c, p, n, err)))
                return st;
        if (st)
            return st;
    }
    return FHR_OK;
}

/* Field f of value i as declared (name, bytes at full size, scaled), and where its content
 * starts in the value's synthetic stream: after the fields before it; a seeded value's "b"
 * and "a" each from 0 (counter: "a" is the generator's). */
static void declared_field(const rplan_kernel_call *c, size_t i, size_t f, const char **name,
                           uint64_t *nbytes, uint64_t *base, int *counter)
{
    const rplan_vm *vm = c->vm;
    const rplan_value_info *vi = &vm->vinfo[i];
    *counter = 0;
    if (vi->seeded && !vi->nfields) {
        *name = f ? "a" : "b";
        *nbytes = f ? vi->regen_nbytes : vi->nbytes - vi->regen_nbytes;
        *base = 0;
        *counter = (int)f;
        return;
    }
    *base = 0;
    for (size_t k = 0; k < f; k++)
        *base += vm->flds[vm->fld0[i] + k].nbytes;
    *name = vm->flds[vm->fld0[i] + f].name;
    *nbytes = vm->flds[vm->fld0[i] + f].nbytes;
}

/* verify of a partial copy of a limb-cut value: each field it holds, its q-limbs and its
 * special limbs, against the content at their places in the whole value. */
static fhr_status verify_cut(const rplan_kernel_call *c, size_t v, fhr_error *err)
{
    const rplan_value_info *vi = c->infos[v];
    size_t i = (size_t)(vi - c->vm->vinfo);
    int synth = vi->data == RPLAN_DATA_SYNTH;
    size_t nf = vi->nfields ? vi->nfields : vi->seeded ? 2 : 1;
    for (size_t f = 0; f < nf; f++) {
        const char *name;
        uint64_t full, base;
        int counter;
        declared_field(c, i, f, &name, &full, &base, &counter);
        void *p;
        size_t n;
        if (fhr_value_field(c->values[v], name, &p, &n) != FHR_OK)
            continue; /* a part this copy does not hold */
        uint64_t limb = full / (vi->limb_q + vi->limb_special);
        uint64_t held = n / limb - vi->limb_special, key = counter ? seeded_key(vi) : vi->seed;
        fhr_status st = verify_range_on(c, p, (size_t)(held * limb), counter, synth, key, base,
                                        err);
        if (st == FHR_OK && vi->limb_special)
            st = verify_range_on(c, (char *)p + held * limb, (size_t)(vi->limb_special * limb),
                                 counter, synth, key, base + vi->limb_q * limb, err);
        if (st)
            return st;
    }
    return FHR_OK;
}

/* Whether the copy a kernel got is a device copy of a limb-cut value (read by field). */
static int is_partial(const rplan_kernel_call *c, size_t v)
{
    /* whole ones too: they lie one buffer per part, so their bytes are not one run */
    return c->infos[v]->limb_q && c->loc.kind == FHR_LOC_CUDA;
}

static fhr_status verify_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)ctx;
    for (size_t v = 0; v < c->nvalues; v++) {
        const rplan_value_info *vi = c->infos[v];
        if (vi->data == RPLAN_DATA_FILE)
            return fhr_fail(err, FHR_E_UNSUPPORTED,
                            "verify: %s comes from a file; only synth and zero content can be "
                            "recomputed",
                            vi->name);
        int synth = vi->data == RPLAN_DATA_SYNTH;
        if (is_partial(c, v) && !(vi->seeded && vi->nfields)) {
            fhr_status st = verify_cut(c, v, err);
            if (st)
                return st;
            continue;
        }
        if (vi->seeded && vi->nfields)
            return fhr_fail(err, FHR_E_UNSUPPORTED,
                            "verify: %s has seeded fields; verify recomputes the 'b' and 'a' "
                            "halves of a seeded value without fields(...) only",
                            vi->name);
        if (vi->seeded) { /* "b" against its content; "a" (where held) against the generator */
            void *pb, *pa;
            size_t nb, na;
            fhr_status st = fhr_value_field(c->values[v], "b", &pb, &nb);
            if (st == FHR_OK)
                st = verify_range_on(c, pb, nb, 0, synth, vi->seed, 0, err);
            else
                return fhr_fail(err, FHR_E_INVALID, "verify: seeded value %s has no field 'b'",
                                vi->name);
            if (st == FHR_OK && fhr_value_field(c->values[v], "a", &pa, &na) == FHR_OK) {
                if (strcmp(vi->generator, FHR_GENERATOR_COUNTER) != 0)
                    return fhr_fail(err, FHR_E_UNSUPPORTED,
                                    "verify: %s is regenerated by '%s'; only the built-in "
                                    "counter generator can be recomputed",
                                    vi->name, vi->generator);
                st = verify_range_on(c, pa, na, 1, 0, seeded_key(vi), 0, err);
            }
            if (st)
                return st;
            continue;
        }
        const void *p;
        size_t n;
        fhr_status st = value_bytes(c, v, &p, &n, err);
        if (st)
            return st;
        if (c->device_memory) {
            st = fhk_verify(c->stream, p, n, synth, vi->seed,
                            (unsigned long long *)counter_of(c), err);
        } else {
            host_job *j = new_job(JOB_VERIFY, err);
            if (!j)
                return FHR_E_NOMEM;
            j->src = p;
            j->n = n;
            j->synth = synth;
            j->seed = vi->seed;
            j->counter = counter_of(c);
            st = enqueue(c->backend, c->stream, j, err);
        }
        if (st)
            return st;
    }
    return FHR_OK;
}

static fhr_status spin_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)ctx;
    uint64_t ns = 0;
    for (size_t a = 0; a < c->nargs; a++)
        if (c->args[a].kind == RPLAN_ARG_DURATION || c->args[a].kind == RPLAN_ARG_INT)
            ns += c->args[a].imm;
    if (c->device_memory)
        return fhk_spin(c->stream, ns, err);
    int virt = 0;
    fhr_backend_clock_ns(c->backend, &virt);
    if (virt) /* simulated time: the VM advances the stream by the body's modelled time */
        return FHR_OK;
    host_job *j = new_job(JOB_SPIN, err);
    if (!j)
        return FHR_E_NOMEM;
    j->ns = ns;
    return enqueue(c->backend, c->stream, j, err);
}

/* One run of a key against the ciphertext, accumulated in the body's scratch. */
static fhr_status keyswitch_run(const rplan_kernel_call *c, const void *ct, size_t nct,
                                const void *key, size_t nkey, uint32_t repeat, fhr_error *err)
{
    size_t wct = nct / 8, wkey = nkey / 8, wacc = wct < c->scratch_nbytes / 8
                                                      ? wct
                                                      : c->scratch_nbytes / 8;
    if (!wct || !wkey || !wacc)
        return FHR_OK;
    if (c->device_memory)
        return fhk_keyswitch(c->stream, ct, wct, key, wkey, c->scratch, wacc, repeat, err);
    host_job *j = new_job(JOB_KEYSWITCH, err);
    if (!j)
        return FHR_E_NOMEM;
    j->ct = ct;
    j->key = key;
    j->acc = c->scratch;
    j->nct = wct;
    j->nkey = wkey;
    j->nacc = wacc;
    j->repeat = repeat;
    return enqueue(c->backend, c->stream, j, err);
}

static fhr_status keyswitch_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)ctx;
    size_t vct = SIZE_MAX, vkey = SIZE_MAX;
    uint32_t repeat = 1;
    for (size_t a = 0; a < c->nargs; a++) {
        if (c->args[a].kind == RPLAN_ARG_VALUE) {
            if (vct == SIZE_MAX)
                vct = c->args[a].value;
            else if (vkey == SIZE_MAX)
                vkey = c->args[a].value;
        } else if (c->args[a].kind == RPLAN_ARG_INT && c->args[a].imm > 0) {
            if (c->args[a].imm > RPLAN_KEYSWITCH_MAX_BATCH) /* vm_run_body refuses it first */
                return fhr_fail(err, FHR_E_INVALID, "ckks.keyswitch: batch %llu above %u",
                                (unsigned long long)c->args[a].imm, RPLAN_KEYSWITCH_MAX_BATCH);
            repeat = (uint32_t)c->args[a].imm;
        }
    }
    if (vct == SIZE_MAX || vkey == SIZE_MAX)
        return fhr_fail(err, FHR_E_INVALID, "ckks.keyswitch needs (ciphertext, key [, batch])");
    const void *ct, *key;
    size_t nct, nkey, f = 0;
    fhr_status st = value_bytes(c, vct, &ct, &nct, err);
    /* the key's every run against the ciphertext (a cut key lies one buffer per part) */
    while (st == FHR_OK && (st = value_run(c, vkey, &f, &key, &nkey, err)) == FHR_OK && nkey)
        st = keyswitch_run(c, ct, nct, key, nkey, repeat, err);
    return st;
}

fhr_status vm_register_builtins(rplan_vm *vm, fhr_error *err)
{
    fhr_status st;
    if ((st = rplan_kernel_register(vm, "touch", vm_touch_kernel, vm, err)) ||
        (st = rplan_kernel_register(vm, "verify", verify_kernel, vm, err)) ||
        (st = rplan_kernel_register(vm, "spin", spin_kernel, vm, err)) ||
        (st = rplan_kernel_register(vm, "ckks.keyswitch", keyswitch_kernel, vm, err)))
        return st;
    return FHR_OK;
}
