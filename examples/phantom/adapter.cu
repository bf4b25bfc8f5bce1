// examples/phantom/adapter.cu — our adapter over Phantom (CUDA C++, extern "C"): context,
// keys, key export and binding through the relinearization key's pointer table, and the
// BSGS linear transform cut into one step per key use. Built against the user's Phantom
// tree by mk/phantom.mk; never part of libfheplan.
#include "examples/phantom/adapter.h"

#include "phantom.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

using namespace phantom;
using namespace phantom::arith;
using namespace phantom::util;

namespace {

constexpr size_t LOG_N = 16;
constexpr double SCALE = 1099511627776.0; // 2^40
constexpr int NDIAG = PH_N1 * PH_N2;

int fail(char *msg, size_t cap, const char *what)
{
    if (msg && cap)
        snprintf(msg, cap, "%s", what);
    return -1;
}

int cuda_fail(char *msg, size_t cap, const char *what, cudaError_t e)
{
    if (msg && cap)
        snprintf(msg, cap, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

// Writes the dnum part pointers of a key laid out [part 0 | part 1 | ...] into a table.
__global__ void bind_parts(uint64_t **table, uint64_t *base, size_t part_words, size_t dnum)
{
    size_t i = threadIdx.x;
    if (i < dnum)
        table[i] = base + i * part_words;
}

} // namespace

struct ph_engine {
    int nct = 0;
    size_t slots = 0, dnum = 0, qp = 0, n = 0;
    std::unique_ptr<PhantomContext> ctx;
    std::unique_ptr<PhantomSecretKey> sk;
    std::unique_ptr<PhantomGaloisKey> gk;
    std::unique_ptr<PhantomCKKSEncoder> enc;
    std::vector<std::vector<double>> diag;  // m_d, d = 0..NDIAG-1
    std::vector<std::vector<double>> input; // the slots of each ciphertext
    std::vector<PhantomCiphertext> x;       // encrypted inputs
    // plaintexts per pass: pass 0 baby-first P0[i][j], pass 1 giant-first P1[i][j]
    std::vector<PhantomPlaintext> plain[PH_PASSES];
    std::vector<PhantomCiphertext> cur;     // input of the running pass, per ciphertext
    std::vector<PhantomCiphertext> acc;     // [c * 8 + k]: partial sums
    std::vector<PhantomCiphertext> fresh;   // per ciphertext: the last use's rotation
    int fresh_l = -1;                       // its rotation index, -1: none pending
    std::vector<PhantomCiphertext> out;     // results of the last pass
};

static int baby_key(int i) { return i - 1; }             // i = 1..N1-1
static int giant_key(int j) { return PH_N1 - 2 + j; }    // j = 1..N2-1

extern "C" int ph_key_step(int k)
{
    return k < PH_N1 - 1 ? k + 1 : PH_N1 * (k - (PH_N1 - 2));
}

extern "C" int ph_use_key(int pass, int u)
{
    if (pass == 0) // baby steps 1..7, then giant steps 8..56
        return u < PH_N1 - 1 ? baby_key(u + 1) : giant_key(u - (PH_N1 - 1) + 1);
    // giant steps 56..8, then baby steps 7..1
    return u < PH_N2 - 1 ? giant_key(PH_N2 - 1 - u) : baby_key(PH_N1 - 1 - (u - (PH_N2 - 1)));
}

static std::vector<double> rotated(const std::vector<double> &v, long k)
{
    // rotated(v, k)[s] = v[(s + k) mod S]: Phantom's rotation by k to the left
    size_t S = v.size();
    std::vector<double> r(S);
    long m = ((k % (long)S) + (long)S) % (long)S;
    for (size_t s = 0; s < S; s++)
        r[s] = v[(s + (size_t)m) % S];
    return r;
}

extern "C" int ph_create(int nct, uint64_t seed, ph_engine **out, char *msg, size_t cap)
{
    try {
        auto e = std::make_unique<ph_engine>();
        e->nct = nct;
        EncryptionParameters parms(scheme_type::ckks);
        size_t N = size_t(1) << LOG_N;
        parms.set_poly_modulus_degree(N);
        std::vector<int> bits = {60};
        for (int i = 0; i < 29; i++)
            bits.push_back(40);
        for (int i = 0; i < 6; i++)
            bits.push_back(60);
        parms.set_coeff_modulus(CoeffModulus::Create(N, bits));
        parms.set_special_modulus_size(6);
        std::vector<int> steps;
        for (int k = 0; k < PH_KEYS; k++)
            steps.push_back(ph_key_step(k));
        parms.set_galois_elts(get_elts_from_steps(steps, N));
        e->ctx = std::make_unique<PhantomContext>(parms);
        e->sk = std::make_unique<PhantomSecretKey>(*e->ctx);
        e->gk = std::make_unique<PhantomGaloisKey>(e->sk->create_galois_keys(*e->ctx));
        e->enc = std::make_unique<PhantomCKKSEncoder>(*e->ctx);
        e->n = N;
        e->slots = e->enc->slot_count();
        e->qp = bits.size();
        e->dnum = (e->qp - 6) / 6;

        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        e->diag.assign(NDIAG, std::vector<double>(e->slots));
        for (auto &d : e->diag)
            for (auto &v : d)
                v = u(rng) / 16.0;
        e->input.assign(nct, std::vector<double>(e->slots));
        for (auto &x : e->input)
            for (auto &v : x)
                v = u(rng);
        for (int c = 0; c < nct; c++) {
            PhantomPlaintext p;
            e->enc->encode(*e->ctx, e->input[c], SCALE, p);
            PhantomCiphertext ct;
            e->sk->encrypt_symmetric(*e->ctx, p, ct);
            e->x.push_back(std::move(ct));
        }
        // Pass 0 (baby steps first): P0[i][j] = rot(m_{8j+i}, -8j), at the first level.
        // Pass 1 (giant steps first): P1[i][j] = rot(m_{8j+i}, -i), one level down.
        size_t level[PH_PASSES] = {e->x[0].chain_index(), e->x[0].chain_index() + 1};
        for (int pass = 0; pass < PH_PASSES; pass++) {
            e->plain[pass].resize(NDIAG);
            for (int i = 0; i < PH_N1; i++)
                for (int j = 0; j < PH_N2; j++) {
                    long shift = pass == 0 ? -(long)PH_N1 * j : -(long)i;
                    auto v = rotated(e->diag[PH_N1 * j + i], shift);
                    e->enc->encode(*e->ctx, v, SCALE, e->plain[pass][i * PH_N2 + j], level[pass]);
                }
        }
        cudaError_t ce = cudaStreamSynchronize(cudaStreamPerThread);
        if (ce != cudaSuccess)
            return cuda_fail(msg, cap, "phantom setup", ce);
        *out = e.release();
        return 0;
    } catch (const std::exception &x) {
        return fail(msg, cap, x.what());
    }
}

extern "C" void ph_destroy(ph_engine *e)
{
    if (!e)
        return;
    cudaStreamSynchronize(cudaStreamPerThread);
    delete e;
}

extern "C" size_t ph_key_bytes(const ph_engine *e)
{
    return e->dnum * 2 * e->qp * e->n * sizeof(uint64_t);
}

extern "C" int ph_export_key(ph_engine *e, int k, void *dst, char *msg, size_t cap)
{
    const PhantomRelinKey &rk = e->gk->get_relin_keys(k);
    std::vector<uint64_t *> parts(e->dnum);
    cudaError_t ce = cudaMemcpy(parts.data(), rk.public_keys_ptr(), e->dnum * sizeof(uint64_t *),
                                cudaMemcpyDeviceToHost);
    size_t part_bytes = 2 * e->qp * e->n * sizeof(uint64_t);
    for (size_t i = 0; ce == cudaSuccess && i < e->dnum; i++)
        ce = cudaMemcpy((char *)dst + i * part_bytes, parts[i], part_bytes, cudaMemcpyDeviceToHost);
    return ce == cudaSuccess ? 0 : cuda_fail(msg, cap, "export key", ce);
}

extern "C" int ph_release_keys(ph_engine *e, char *msg, size_t cap)
{
    for (int k = 0; k < PH_KEYS; k++)
        e->gk->relin_key_mut(k).release_parts();
    cudaError_t ce = cudaStreamSynchronize(cudaStreamPerThread);
    return ce == cudaSuccess ? 0 : cuda_fail(msg, cap, "release keys", ce);
}

extern "C" int ph_bind_key(ph_engine *e, int k, const void *device, char *msg, size_t cap)
{
    const PhantomRelinKey &rk = e->gk->get_relin_keys(k);
    bind_parts<<<1, 32, 0, cudaStreamPerThread>>>(rk.public_keys_ptr(), (uint64_t *)device,
                                                  2 * e->qp * e->n, e->dnum);
    cudaError_t ce = cudaGetLastError();
    return ce == cudaSuccess ? 0 : cuda_fail(msg, cap, "bind key", ce);
}

// The plaintext of partial sum k and rotation l: pass 0 sums over baby steps l = i for
// each giant step k = j; pass 1 over giant steps l = j for each baby step k = i.
static const PhantomPlaintext &diag_plain(const ph_engine *e, int pass, int k, int l)
{
    int i = pass == 0 ? l : k, j = pass == 0 ? k : l;
    return e->plain[pass][i * PH_N2 + j];
}

// acc[c*8 + k] += plain(k, l) * r for every k: the products of one rotation, enqueued right
// after it, so that they run while the next key is still on its way.
static void accumulate(ph_engine *e, int pass, int c, int l, const PhantomCiphertext &r)
{
    for (int k = 0; k < 8; k++) {
        PhantomCiphertext t = r;
        multiply_plain_inplace(*e->ctx, t, diag_plain(e, pass, k, l));
        if (l == 0)
            e->acc[c * 8 + k] = std::move(t);
        else
            add_inplace(*e->ctx, e->acc[c * 8 + k], t);
    }
}

extern "C" int ph_pass_begin(ph_engine *e, int pass, char *msg, size_t cap)
{
    try {
        e->cur = pass == 0 ? e->x : e->out;
        e->acc.clear();
        e->acc.resize(e->nct * 8);
        for (int c = 0; c < e->nct; c++) // rotation 0 needs no key: its products go first
            accumulate(e, pass, c, 0, e->cur[c]);
        return 0;
    } catch (const std::exception &x) {
        return fail(msg, cap, x.what());
    }
}

extern "C" int ph_pass_use(ph_engine *e, int pass, int u, char *msg, size_t cap)
{
    try {
        int step = ph_key_step(ph_use_key(pass, u));
        if (u < 7) { // first rotations, of the pass input; products in ph_pass_after_use
            e->fresh = e->cur;
            for (int c = 0; c < e->nct; c++)
                rotate_inplace(*e->ctx, e->fresh[c], step, *e->gk);
            e->fresh_l = pass == 0 ? step : step / PH_N1;
        } else { // second rotations: of the partial sums
            int k = pass == 0 ? step / PH_N1 : step;
            for (int c = 0; c < e->nct; c++)
                rotate_inplace(*e->ctx, e->acc[c * 8 + k], step, *e->gk);
        }
        return 0;
    } catch (const std::exception &x) {
        return fail(msg, cap, x.what());
    }
}

extern "C" int ph_pass_after_use(ph_engine *e, int pass, char *msg, size_t cap)
{
    try {
        if (e->fresh_l >= 0)
            for (int c = 0; c < e->nct; c++)
                accumulate(e, pass, c, e->fresh_l, e->fresh[c]);
        e->fresh_l = -1;
        e->fresh.clear();
        return 0;
    } catch (const std::exception &x) {
        return fail(msg, cap, x.what());
    }
}

extern "C" int ph_pass_end(ph_engine *e, int pass, char *msg, size_t cap)
{
    (void)pass;
    try {
        e->out.clear();
        for (int c = 0; c < e->nct; c++) {
            PhantomCiphertext y = e->acc[c * 8 + 0];
            for (int k = 1; k < 8; k++)
                add_inplace(*e->ctx, y, e->acc[c * 8 + k]);
            rescale_to_next_inplace(*e->ctx, y);
            e->out.push_back(std::move(y));
        }
        e->acc.clear();
        return 0;
    } catch (const std::exception &x) {
        return fail(msg, cap, x.what());
    }
}

extern "C" int ph_sync(char *msg, size_t cap)
{
    cudaError_t ce = cudaStreamSynchronize(cudaStreamPerThread);
    return ce == cudaSuccess ? 0 : cuda_fail(msg, cap, "cudaStreamSynchronize", ce);
}

extern "C" int ph_results(ph_engine *e, uint64_t **words, size_t *nwords, char *msg, size_t cap)
{
    size_t total = 0;
    for (auto &c : e->out)
        total += c.size() * c.coeff_modulus_size() * c.poly_modulus_degree();
    uint64_t *w = (uint64_t *)malloc((total ? total : 1) * sizeof *w);
    if (!w)
        return fail(msg, cap, "out of host memory for the results");
    size_t at = 0;
    cudaError_t ce = cudaSuccess;
    for (auto &c : e->out) {
        size_t n = c.size() * c.coeff_modulus_size() * c.poly_modulus_degree();
        if (ce == cudaSuccess)
            ce = cudaMemcpy(w + at, c.data(), n * sizeof *w, cudaMemcpyDeviceToHost);
        at += n;
    }
    if (ce != cudaSuccess) {
        free(w);
        return cuda_fail(msg, cap, "copy results", ce);
    }
    *words = w;
    *nwords = total;
    return 0;
}

static std::vector<double> transform(const ph_engine *e, const std::vector<double> &x)
{
    size_t S = x.size();
    std::vector<double> y(S, 0.0);
    for (int d = 0; d < NDIAG; d++)
        for (size_t s = 0; s < S; s++)
            y[s] += e->diag[d][s] * x[(s + d) % S];
    return y;
}

extern "C" int ph_check_slots(ph_engine *e, double *max_err, char *msg, size_t cap)
{
    try {
        double worst = 0;
        for (int c = 0; c < e->nct; c++) {
            std::vector<double> want = transform(e, transform(e, e->input[c]));
            PhantomPlaintext p;
            e->sk->decrypt(*e->ctx, e->out[c], p);
            std::vector<double> got;
            e->enc->decode(*e->ctx, p, got);
            for (size_t s = 0; s < e->slots; s++)
                worst = std::fmax(worst, std::fabs(got[s] - want[s]));
        }
        *max_err = worst;
        return 0;
    } catch (const std::exception &x) {
        return fail(msg, cap, x.what());
    }
}

extern "C" int ph_selftest(ph_engine *e, double *max_err, char *msg, size_t cap)
{
    try {
        PhantomPlaintext p, q;
        e->enc->encode(*e->ctx, e->input[0], SCALE, p);
        PhantomCiphertext ct;
        e->sk->encrypt_symmetric(*e->ctx, p, ct);
        e->sk->decrypt(*e->ctx, ct, q);
        std::vector<double> got;
        e->enc->decode(*e->ctx, q, got);
        double worst = 0;
        for (size_t s = 0; s < e->slots; s++)
            worst = std::fmax(worst, std::fabs(got[s] - e->input[0][s]));
        *max_err = worst;
        return 0;
    } catch (const std::exception &x) {
        return fail(msg, cap, x.what());
    }
}

extern "C" int ph_pinned_bandwidth(size_t nbytes, int reps, double *bytes_per_s, char *msg,
                                   size_t cap)
{
    void *h = nullptr, *d = nullptr;
    cudaStream_t s = nullptr;
    cudaEvent_t a = nullptr, b = nullptr;
    cudaError_t ce = cudaHostAlloc(&h, nbytes, cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaMalloc(&d, nbytes);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&a);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&b);
    if (ce == cudaSuccess)
        memset(h, 1, nbytes);
    float best = 0;
    for (int r = 0; ce == cudaSuccess && r < reps; r++) {
        float ms = 0;
        cudaEventRecord(a, s);
        cudaMemcpyAsync(d, h, nbytes, cudaMemcpyHostToDevice, s);
        cudaEventRecord(b, s);
        ce = cudaEventSynchronize(b);
        if (ce == cudaSuccess)
            ce = cudaEventElapsedTime(&ms, a, b);
        if (ce == cudaSuccess && (best == 0 || ms < best))
            best = ms;
    }
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    if (s)
        cudaStreamDestroy(s);
    cudaFree(d);
    cudaFreeHost(h);
    if (ce != cudaSuccess)
        return cuda_fail(msg, cap, "pinned bandwidth", ce);
    *bytes_per_s = (double)nbytes / (best / 1000.0);
    return 0;
}
