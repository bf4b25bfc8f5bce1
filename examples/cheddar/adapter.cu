// examples/cheddar/adapter.cu — our adapter over a user's Cheddar tree (see adapter.h).
// It is compiled against Cheddar's headers after patch-cheddar.sh has opened the members
// the phase-by-phase bootstrap needs (BootContext's phases, the special FFT's linear
// transforms and their hoisting handlers' plaintexts); it changes no Cheddar code path.
#include "adapter.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <complex>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <rmm/mr/device/device_memory_resource.hpp>
#include <rmm/mr/device/per_device_resource.hpp>

#include "Random.h"
#include "UserInterface.h"
#include "extension/BootContext.h"

using namespace cheddar;
using word = uint32_t;
using Ct = Ciphertext<word>;
using Pt = Plaintext<word>;
using Evk = EvaluationKey<word>;
using Dv = DeviceVector<word>;
using Complex = std::complex<double>;

namespace {

int fail(char *msg, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (msg && n)
        vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return -1;
}

#define CU(call, what)                                                                   \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess)                                                           \
            return fail(msg, n, "%s: %s", what, cudaGetErrorString(e_));                 \
    } while (0)

// The memory resource every Cheddar allocation goes through once the engine exists. It
// forwards to Cheddar's own pool and counts what is outstanding there, except while a
// binding is open: then it hands out the next bytes of a region the caller owns (a copy
// fheplan leased on the device), so that Cheddar's key and plaintext objects built in
// that window point into it; releasing such an address is a no-op.
class BindResource final : public rmm::mr::device_memory_resource {
  public:
    explicit BindResource(rmm::mr::device_memory_resource *up) : up_(up) {}

    void open(void *base, size_t nbytes)
    {
        next_ = static_cast<char *>(base);
        left_ = nbytes;
        overrun_ = false;
        regions_ = nullptr;
    }
    // The same over n regions of `each` bytes: each allocation takes the next region whole
    // (an allocation of another size, or one more than n, overruns).
    void open(void *const *regions, int n, size_t each)
    {
        open(n ? regions[0] : nullptr, n ? each : 0);
        regions_ = regions;
        nregions_ = n;
        each_ = each;
        region_ = 0;
    }
    // Closes the binding; returns the bytes of the region left unused (-1: an allocation
    // asked for more than the region held).
    long long close()
    {
        long long r = overrun_ ? -1 : (long long)left_;
        if (regions_ && !overrun_ && region_ < nregions_)
            r += (long long)((nregions_ - region_ - 1) * each_);
        next_ = nullptr;
        left_ = 0;
        regions_ = nullptr;
        return r;
    }
    uint64_t now() const { return now_; }
    uint64_t peak() const { return peak_; }
    void reset_peak() { peak_ = now_; }

  private:
    void *do_allocate(std::size_t bytes, rmm::cuda_stream_view s) override
    {
        if (regions_ && next_ && left_ == 0 && region_ + 1 < nregions_) {
            next_ = static_cast<char *>(regions_[++region_]); // the next field's region
            left_ = each_;
        }
        if (next_) {
            if (bytes > left_ || (regions_ && bytes != left_)) {
                overrun_ = true;
                throw std::runtime_error("binding: an allocation outgrew the leased region");
            }
            void *p = next_;
            next_ += bytes;
            left_ -= bytes;
            bound_.insert(p);
            return p;
        }
        void *p = up_->allocate(bytes, s);
        now_ += bytes;
        peak_ = std::max(peak_, now_);
        return p;
    }
    void do_deallocate(void *p, std::size_t bytes, rmm::cuda_stream_view s) override
    {
        if (bound_.erase(p))
            return;
        up_->deallocate(p, bytes, s);
        now_ -= bytes;
    }
    bool supports_streams() const noexcept override { return up_->supports_streams(); }
    bool supports_get_mem_info() const noexcept override { return false; }
    std::pair<std::size_t, std::size_t> do_get_mem_info(rmm::cuda_stream_view) const override
    {
        return {0, 0};
    }

    rmm::mr::device_memory_resource *up_;
    char *next_ = nullptr;
    size_t left_ = 0;
    bool overrun_ = false;
    void *const *regions_ = nullptr; // open over fields: their regions, and the one in use
    int nregions_ = 0, region_ = 0;
    size_t each_ = 0;
    std::unordered_set<void *> bound_;
    uint64_t now_ = 0, peak_ = 0;
};

// One open binding for the lifetime of a scope.
class Binding {
  public:
    Binding(BindResource *r, void *base, size_t nbytes) : r_(r) { r_->open(base, nbytes); }
    Binding(BindResource *r, void *const *regions, int n, size_t each) : r_(r)
    {
        r_->open(regions, n, each);
    }
    ~Binding()
    {
        if (r_)
            r_->close();
    }
    long long close()
    {
        long long left = r_->close();
        r_ = nullptr;
        return left;
    }

  private:
    BindResource *r_;
};

// Our a-half sampler: word j of prime slot p of part `part` of the key with Cheddar index
// key_idx is a 64-bit mix of the four, scaled onto [0, prime) (see sample_a_kernel). The
// slot is the full key's (q-limbs, then the special limbs), whatever part of the half is
// written: a range regenerates a partial copy's limbs as the whole key has them.
__device__ __host__ inline uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The word is the high half of h times the prime, uniform on [0, prime) to within 2^-32:
// no division on the device (a 64-bit modulo costs the GPU far more than the hash, and the
// sampler runs beside Cheddar's kernels on every seeded load). The degree is a power of two.
// dst[i] is word start + i of the half.
__global__ void sample_a_kernel(word *dst, const word *primes, size_t start, size_t count,
                                int log_degree, uint64_t base)
{
    uint64_t mask = ((uint64_t)1 << log_degree) - 1;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t w = start + i, p = w >> log_degree;
        uint64_t h = mix64(base ^ mix64(((uint64_t)p << 32) | ((uint64_t)w & mask)));
        dst[i] = (word)__umul64hi(h, (uint64_t)primes[p]);
    }
}

uint64_t sample_base(int key_idx, int part)
{
    return mix64(((uint64_t)(uint32_t)key_idx << 8) ^ (uint64_t)part ^ 0x66686570ull);
}

// Words [start, start + count) of the half (primes: the key's, slot by slot).
cudaError_t sample_a(word *dst, const word *primes, size_t start, size_t count, int degree,
                     int key_idx, int part, cudaStream_t s)
{
    int log_degree = 0;
    while ((1 << log_degree) < degree)
        log_degree++;
    if (degree <= 0 || (1 << log_degree) != degree)
        return cudaErrorInvalidValue;
    if (count == 0)
        return cudaSuccess;
    int blocks = (int)std::min<size_t>((count + 255) / 256, 4096);
    sample_a_kernel<<<blocks, 256, 0, s>>>(dst, primes, start, count, log_degree,
                                           sample_base(key_idx, part));
    return cudaGetLastError();
}

// Cheddar's key generation calls this for every part's a half (patch-cheddar.sh's hook).
void keygen_hook(void *, word *dst, const word *primes, int num_primes, int degree,
                 int key_idx, int part)
{
    sample_a(dst, primes, 0, (size_t)num_primes * degree, degree, key_idx, part,
             cudaStreamLegacy);
}

struct KeyRec {
    ch_key_info info;
    NPInfo np;
    void *host = nullptr; // pinned export
};

struct PtRec {             // one transform's diagonals
    ch_pt_info info;
    std::vector<Pt *> pts;  // the plaintext objects inside Cheddar's hoisting handler
    size_t words = 0;       // of each
    void *host = nullptr;   // pinned export, the diagonals back to back
};

struct PhaseRec {
    ch_phase_info info;
    std::vector<int> keys, pts;
    std::vector<int> limbs; // per key: the q-limbs the phase reads
    int kind;             // 0 modup, 1 baby steps, 2 giant steps, 3 evalmod, 4 one giant step
    int stc;              // baby / giant steps: 0 CoeffToSlot, 1 SlotToCoeff
    int sub;              // the transform's index
    int gs = 0;           // kind 4: the giant-step index (its rotation)
    bool first = false;   // kind 4: accumulates the diagonals first
    bool last = false;    // kind 4: ends the transform
};

// What one ciphertext carries from one giant-step phase to the next: the accumulators
// (giant-step index -> the diagonals' sum over the baby steps; 0 holds the total) and what
// the closing mod-down needs of the baby steps' ciphertext.
struct GiantState {
    std::map<int, Ct> accum;
    NPInfo np;
    int num_slots = 0;
    double scale = 0;
};

} // namespace

struct ch_engine {
    std::unique_ptr<Parameter<word>> param;
    std::shared_ptr<BootContext<word>> boot;
    std::unique_ptr<UserInterface<word>> ui;
    BindResource *binder = nullptr; // lives as long as the process: objects made through it
                                    // release through it
    int num_slots = 0;
    int batch_max = 0;
    std::vector<KeyRec> keys;
    std::map<int, int> key_of_index; // EvkMap index -> catalogue
    std::vector<PtRec> pts;
    std::vector<PhaseRec> phases;
    bool keys_exported = false, pts_exported = false;
    std::vector<std::vector<Complex>> msgs;
    std::vector<Ct> in, main, res, conj;
    std::vector<std::map<int, Ct>> bs; // baby-step results between the two requests
    std::vector<GiantState> gs;         // between the giant-step phases of a transform
    std::vector<std::vector<word>> ref; // reference results: bx then ax words
    double scale_end = 0;
};

namespace {

void put_words(std::vector<word> &out, const Ct &c)
{
    size_t nb = c.bx_.size(), na = c.ax_.size();
    out.resize(nb + na);
    cudaMemcpy(out.data(), c.bx_.data(), nb * sizeof(word), cudaMemcpyDeviceToHost);
    cudaMemcpy(out.data() + nb, c.ax_.data(), na * sizeof(word), cudaMemcpyDeviceToHost);
}

int read_params(const char *path, ch_engine *e, int *cts, int *stc, char *msg, size_t n)
{
    std::ifstream f(path);
    if (!f.is_open())
        return fail(msg, n, "cannot open the parameter file %s", path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(f);
        std::vector<word> main_p, aux_p, ter_p;
        for (auto &p : j.at("main_primes"))
            main_p.push_back(p.get<word>());
        for (auto &p : j.at("auxiliary_primes"))
            aux_p.push_back(p.get<word>());
        if (j.contains("terminal_primes"))
            for (auto &p : j.at("terminal_primes"))
                ter_p.push_back(p.get<word>());
        std::vector<std::pair<int, int>> levels;
        for (auto &p : j.at("level_config"))
            levels.emplace_back(p.at(0).get<int>(), p.at(1).get<int>());
        std::pair<int, int> extra{0, 0};
        if (j.contains("additional_base"))
            extra = {j["additional_base"].at(0).get<int>(), j["additional_base"].at(1).get<int>()};
        int log_degree = j.at("log_degree").get<int>();
        double scale = (double)(UINT64_C(1) << j.at("log_default_scale").get<int>());
        int enc_level = j.at("default_encryption_level").get<int>();
        if (!j.value("boot", false))
            return fail(msg, n, "%s: not a bootstrapping parameter set (\"boot\" is not true)",
                        path);
        *cts = j.at("num_cts_levels").get<int>();
        *stc = j.at("num_stc_levels").get<int>();
        e->param = std::make_unique<Parameter<word>>(log_degree, scale, enc_level, levels,
                                                     main_p, aux_p, ter_p, extra);
        if (j.contains("dense_hamming_weight"))
            e->param->SetDenseHammingWeight(j["dense_hamming_weight"].get<int>());
        if (j.contains("sparse_hamming_weight"))
            e->param->SetSparseHammingWeight(j["sparse_hamming_weight"].get<int>());
    } catch (const std::exception &ex) {
        return fail(msg, n, "%s: %s", path, ex.what());
    }
    return 0;
}

void key_name(int index, char *out, size_t n)
{
    if (index == EvkMap<word>::kConjugationKeyIndex)
        snprintf(out, n, "conj");
    else if (index == EvkMap<word>::kMultiplicationKeyIndex)
        snprintf(out, n, "mult");
    else if (index == EvkMap<word>::kDenseToSparseKeyIndex)
        snprintf(out, n, "dts");
    else if (index == EvkMap<word>::kSparseToDenseKeyIndex)
        snprintf(out, n, "std");
    else
        snprintf(out, n, "rot%d", index);
}

EvalSpecialFFT<word> &fft_of(ch_engine *e) { return e->boot->GetEvalSpecialFFT(e->num_slots); }

void add_phase(ch_engine *e, const char *name, int kind, int stc, int sub,
               const std::vector<int> &idx, const std::vector<int> &pts)
{
    PhaseRec r;
    memset(&r.info, 0, sizeof r.info);
    snprintf(r.info.name, sizeof r.info.name, "%s", name);
    for (int i : idx)
        r.keys.push_back(e->key_of_index.at(i));
    r.pts = pts;
    r.kind = kind;
    r.stc = stc;
    r.sub = sub;
    e->phases.push_back(std::move(r));
}

// The level of each phase's key switches and the q-limbs it reads of each key: a
// ciphertext at a level with m main primes switches with q-limbs [0, 4 + m) of the key
// (those below its terminal primes are skipped, none above read) and every special limb,
// in the parts those q-limbs reach. Transforms switch at their plaintexts' level, EvalMod
// from its start level down (the start reads the most); modup reads its keys whole (the
// sparse-to-dense key at the maximum level, the dense-to-sparse key on its own base).
int phase_limbs(ch_engine *e, char *msg, size_t n)
{
    auto &fft = fft_of(e);
    const Parameter<word> &pm = *e->param;
    for (auto &p : e->phases) {
        int lvl = pm.max_level_;
        if (p.kind == 3)
            lvl = e->boot->boot_param_.GetEvalModStartLevel();
        else if (p.kind != 0)
            lvl = (p.stc ? fft.stc_phases_ : fft.cts_phases_).at(p.sub).hoist_.GetPtLevel();
        int need = pm.GetMaxNumTer() + pm.LevelToNP(lvl).num_main_;
        p.info.level = lvl;
        p.limbs.clear();
        for (int k : p.keys) {
            const KeyRec &r = e->keys[k];
            // a key without every terminal prime has no q-limb prefix to cut
            int q = p.kind == 0 || r.np.num_ter_ != pm.GetMaxNumTer() ? r.info.q : need;
            if (q > r.info.q || q < 1)
                return fail(msg, n, "phase %s at level %d reads %d q-limbs of key %s, which "
                            "has %d", p.info.name, lvl, q, r.info.name, r.info.q);
            p.limbs.push_back(q);
        }
        p.info.limbs = p.limbs.data();
    }
    return 0;
}

// The catalogue: every key of the user interface's map, the plaintexts of every linear
// transform, and the phases with the keys and plaintexts each reads.
int build_catalogue(ch_engine *e, char *msg, size_t n)
{
    const EvkMap<word> &m = e->ui->GetEvkMap();
    std::vector<int> order;
    for (auto &kv : m)
        order.push_back(kv.first);
    std::sort(order.begin(), order.end());
    for (int idx : order) {
        const Evk &k = m.at(idx);
        KeyRec r;
        memset(&r.info, 0, sizeof r.info);
        r.info.index = idx;
        key_name(idx, r.info.name, sizeof r.info.name);
        r.np = k.GetNP();
        r.info.beta = k.GetBeta();
        if (r.info.beta <= 0 || r.info.beta > CH_MAX_PARTS)
            return fail(msg, n, "key %s has %d parts", r.info.name, r.info.beta);
        r.info.part_bytes = (uint64_t)k.bx_[0].size() * sizeof(word);
        r.info.bytes = 2 * (uint64_t)r.info.beta * r.info.part_bytes;
        r.info.q = r.np.GetNumQ();
        r.info.special = r.np.num_aux_;
        r.info.alpha = e->param->alpha_;
        r.info.limb_bytes = (uint64_t)e->param->degree_ * sizeof(word);
        // the limb cut fheplan is told: the parts cover the q-limbs alpha at a time
        if (r.info.part_bytes != (uint64_t)(r.info.q + r.info.special) * r.info.limb_bytes ||
            r.info.alpha <= 0 || (r.info.q + r.info.alpha - 1) / r.info.alpha != r.info.beta)
            return fail(msg, n, "key %s: %d parts of %llu bytes do not hold %d q-limbs and %d "
                        "special limbs of %llu bytes, %d q-limbs a part", r.info.name,
                        r.info.beta, (unsigned long long)r.info.part_bytes, r.info.q,
                        r.info.special, (unsigned long long)r.info.limb_bytes, r.info.alpha);
        e->key_of_index[idx] = (int)e->keys.size();
        e->keys.push_back(r);
    }
    bool sse = e->param->IsUsingSparseSecretEncapsulation();
    std::vector<int> modup_keys;
    if (sse)
        modup_keys = {EvkMap<word>::kDenseToSparseKeyIndex, EvkMap<word>::kSparseToDenseKeyIndex};
    add_phase(e, "modup", 0, 0, 0, modup_keys, {});
    auto &fft = fft_of(e);
    auto transform = [&](std::vector<LinearTransform<word>> &v, int stc, const char *pfx) {
        for (size_t i = 0; i < v.size(); i++) {
            auto &h = v[i].hoist_;
            // the keys as Cheddar's own request names them (HoistHandler's
            // AddRequiredRotations without min_ks): the non-zero baby-step indices, then
            // the non-zero giant-step indices
            EvkRequest rb, rg;
            for (int idx : h.GetBSIndices())
                if (idx != 0)
                    rb.AddRequest(idx, 0);
            for (int idx : h.GetGSIndices())
                if (idx != 0)
                    rg.AddRequest(idx, 0);
            std::vector<int> bi, gi;
            for (auto &kv : rb)
                bi.push_back(kv.first);
            for (auto &kv : rg)
                gi.push_back(kv.first);
            PtRec g;
            memset(&g.info, 0, sizeof g.info);
            for (auto &gkv : h.hoist_pt_map_)
                for (auto &bkv : gkv.second) {
                    size_t w = bkv.second.mx_.size();
                    if (g.pts.empty())
                        g.words = w;
                    else if (w != g.words)
                        throw std::runtime_error("a transform's diagonals differ in size");
                    g.pts.push_back(&bkv.second);
                }
            char name[16];
            snprintf(name, sizeof name, "%s%zub", pfx, i);
            add_phase(e, name, 1, stc, (int)i, bi, {});
            std::vector<int> pts;
            if (!g.pts.empty()) {
                g.info.phase = (int)e->phases.size();
                g.info.ndiag = (int)g.pts.size();
                g.info.diag_bytes = (uint64_t)g.words * sizeof(word);
                g.info.bytes = g.info.diag_bytes * (uint64_t)g.info.ndiag;
                pts.push_back((int)e->pts.size());
                e->pts.push_back(g);
            }
            // The giant steps one key at a time where Cheddar takes its optimized path
            // (baby steps beyond index 0, giant steps beyond index 0, diagonals present):
            // the non-zero giant-step indices in the order its accumulators are visited.
            std::vector<int> split;
            const auto &bsi = h.GetBSIndices();
            const auto &gsi = h.GetGSIndices();
            bool regular = kOptimizeAutomorphism && !h.hoist_pt_map_.empty() &&
                           !(bsi.size() == 1 && *bsi.begin() == 0) &&
                           !(gsi.size() == 1 && gsi.at(0) == 0);
            for (auto &kv : h.hoist_pt_map_)
                if (regular && kv.first != 0)
                    split.push_back(kv.first);
            if (split.empty()) {
                snprintf(name, sizeof name, "%s%zug", pfx, i);
                add_phase(e, name, 2, stc, (int)i, gi, pts);
                continue;
            }
            for (size_t j = 0; j < split.size(); j++) {
                EvkRequest r1;
                r1.AddRequest(split[j], 0);
                snprintf(name, sizeof name, "%s%zug%zu", pfx, i, j + 1);
                add_phase(e, name, 4, stc, (int)i, {r1.begin()->first},
                          j == 0 ? pts : std::vector<int>{});
                PhaseRec &r = e->phases.back();
                r.gs = split[j];
                r.first = j == 0;
                r.last = j + 1 == split.size();
            }
        }
    };
    try {
        transform(fft.cts_phases_, 0, "cts");
        add_phase(e, "evalmod", 3, 0, 0,
                  {EvkMap<word>::kConjugationKeyIndex, EvkMap<word>::kMultiplicationKeyIndex},
                  {});
        transform(fft.stc_phases_, 1, "stc");
    } catch (const std::exception &ex) {
        return fail(msg, n, "cutting the bootstrap: %s", ex.what());
    }
    if ((int)e->phases.size() > CH_MAX_PHASES)
        return fail(msg, n, "%zu phases, more than %d", e->phases.size(), CH_MAX_PHASES);
    // every key is read by some phase, and the keys of each phase exist
    std::vector<int> used(e->keys.size(), 0);
    for (auto &p : e->phases) {
        for (int k : p.keys)
            used[k]++;
        p.info.nkeys = (int)p.keys.size();
        p.info.npts = (int)p.pts.size();
        p.info.keys = p.keys.data();
        p.info.pts = p.pts.data();
    }
    for (size_t k = 0; k < e->keys.size(); k++)
        if (!used[k])
            fprintf(stderr, "cheddar: key %s is generated but no phase reads it\n",
                    e->keys[k].info.name);
    return phase_limbs(e, msg, n);
}

} // namespace

extern "C" int ch_create(const char *param_json, int batch_max, ch_engine **out, char *msg,
                         size_t n)
{
    *out = nullptr;
    if (batch_max < 1 || batch_max > 256)
        return fail(msg, n, "batch of %d ciphertexts: 1 to 256", batch_max);
    auto e = std::make_unique<ch_engine>();
    int cts = 0, stc = 0;
    if (read_params(param_json, e.get(), &cts, &stc, msg, n))
        return -1;
    e->boot = BootContext<word>::Create(*e->param,
                                        BootParameter(e->param->max_level_, cts, stc));
    e->num_slots = e->param->degree_ / 2;
    e->boot->PrepareEvalMod();
    e->boot->PrepareEvalSpecialFFT(e->num_slots);
    // every key's a halves from our sampler, so that a device can regenerate them
    UserInterface<word>::evk_a_sampler_ = keygen_hook;
    UserInterface<word>::evk_a_sampler_ctx_ = e.get();
    e->ui = std::make_unique<UserInterface<word>>(e->boot);
    EvkRequest req;
    e->boot->AddRequiredRotations(req, e->num_slots);
    e->ui->PrepareRotationKey(req);
    // from here on every allocation of Cheddar's goes through the binding resource
    e->binder = new BindResource(rmm::mr::get_current_device_resource());
    rmm::mr::set_current_device_resource(e->binder);
    if (build_catalogue(e.get(), msg, n))
        return -1;
    e->batch_max = batch_max;
    e->msgs.resize(batch_max);
    e->in.resize(batch_max);
    e->main.resize(batch_max);
    e->res.resize(batch_max);
    e->conj.resize(batch_max);
    e->bs.resize(batch_max);
    e->gs = std::vector<GiantState>(batch_max); // made in place: a map of ciphertexts is not copyable
    e->ref.resize(batch_max);
    for (int c = 0; c < batch_max; c++) {
        auto &m = e->msgs[c];
        m.assign(e->num_slots, Complex(0, 0));
        Random::SampleUniformComplex(m.data(), e->num_slots, -1.0, 1.0);
        Pt p;
        e->boot->encoder_.Encode(p, 0, e->param->GetScale(0), m, 0);
        e->ui->Encrypt(e->in[c], p);
    }
    e->scale_end = e->param->GetScale(e->boot->boot_param_.GetEndLevel());
    CU(cudaDeviceSynchronize(), "setting up Cheddar");
    *out = e.release();
    return 0;
}

extern "C" void ch_destroy(ch_engine *e)
{
    if (!e)
        return;
    cudaDeviceSynchronize();
    for (auto &k : e->keys)
        if (k.host)
            cudaFreeHost(k.host);
    for (auto &p : e->pts)
        if (p.host)
            cudaFreeHost(p.host);
    // the binding resource stays: Cheddar's objects made through it release through it
    delete e;
}

extern "C" int ch_nkeys(const ch_engine *e) { return (int)e->keys.size(); }
extern "C" const ch_key_info *ch_key(const ch_engine *e, int k) { return &e->keys.at(k).info; }
extern "C" int ch_npts(const ch_engine *e) { return (int)e->pts.size(); }
extern "C" const ch_pt_info *ch_pt(const ch_engine *e, int p) { return &e->pts.at(p).info; }
extern "C" int ch_nphases(const ch_engine *e) { return (int)e->phases.size(); }
extern "C" const ch_phase_info *ch_phase(const ch_engine *e, int ph)
{
    return &e->phases.at(ph).info;
}
extern "C" int ch_word_bytes(const ch_engine *) { return (int)sizeof(word); }
extern "C" int ch_pts_exported(const ch_engine *e) { return e->pts_exported; }

namespace {

int events_ms(cudaEvent_t a, cudaEvent_t b, double *ms)
{
    float f = 0;
    if (cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&f, a, b) != cudaSuccess)
        return -1;
    *ms = f;
    return 0;
}

// One giant-step phase of ciphertext c: Cheddar's optimized giant steps (Hoist.cu, the
// path its EvaluateGiantStep takes for a transform with baby and giant steps) cut at its
// keys. The first phase accumulates the plaintext diagonals over the baby steps into one
// accumulator per giant step (the baby steps are then done with); every phase turns one
// accumulator by its key (mod-down, mod-up, key multiplication, rotation) and adds it to
// the total; the last one folds in the accumulators' b parts and mods down into res.
void giant_step(ch_engine *e, const HoistHandler<word> &h, const PhaseRec &p, int c, Ct &res,
                const EvkMap<word> &m)
{
    ConstContextPtr<word> cx = e->boot;
    GiantState &g = e->gs[c];
    std::map<int, Ct> &bs = e->bs[c];
    if (p.first) {
        const Ct &ref = bs.begin()->second;
        g.accum.clear();
        g.np = ref.GetNP();
        g.num_slots = ref.GetNumSlots();
        g.scale = ref.GetScale();
        g.accum.try_emplace(0, g.np);
        for (auto &kv : h.hoist_pt_map_)
            g.accum.try_emplace(kv.first, g.np);
        if (kFuseGSPAccum && h.GetBSIndices().size() <= (1u << HoistHandler<word>::GetMaxLogBS()))
            h.GSFusedPAccum(cx, g.accum, h.GetGSIndices(), bs);
        else
            for (auto &kv : h.hoist_pt_map_)
                h.EvaluateSingleAccum(cx, g.accum.at(kv.first), bs, kv.second);
        bs.clear();
    }
    int degree = cx->param_.degree_;
    int nq = g.np.GetNumQ(), np_aux = g.np.num_aux_;
    int offset = cx->param_.GetMaxNumTer() - g.np.num_ter_;
    int beta = (nq + offset + np_aux - 1) / np_aux; // Cheddar's DivCeil
    auto &ms = cx->mod_switch_handlers_.at(h.GetPtLevel());
    std::vector<Dv> up;
    std::vector<DvView<word>> up_view;
    for (int i = 0; i < beta; i++) {
        up.emplace_back((nq + np_aux) * degree);
        up_view.push_back(up[i].View(np_aux * degree));
    }
    Dv down(nq * degree);
    Ct &total = g.accum.at(0), &acc = g.accum.at(p.gs);
    DvView<word> down_view = down.View(0);
    ms.ModDown(down_view, acc.AxConstView());
    ms.ModUp(up_view, down_view);
    // the index-0 accumulator always exists here (the plaintext map is not empty), so
    // every giant step is turned into a temporary and added, as Cheddar does
    Ct tmp;
    cx->MultKeyNoModDown(tmp, up, acc, m.GetRotationKey(p.gs));
    cx->Permute(tmp, tmp, p.gs);
    cx->Add(total, total, tmp);
    if (p.last) {
        std::vector<std::vector<DvConstView<word>>> bx;
        std::vector<int> rot;
        for (const auto &kv : g.accum) {
            if (kv.first == 0)
                continue;
            bx.push_back({kv.second.BxConstView()});
            rot.push_back(kv.first);
        }
        std::vector<DvView<word>> total_bx = {total.BxView()};
        bx.push_back({total.BxConstView()});
        cx->elem_handler_.PermuteAccum(total_bx, g.np, rot, bx);
        h.EvaluateFinalModDown(cx, res, total, g.num_slots, g.scale);
        g.accum.clear();
    }
}

// Runs phase ph of ciphertext c with the key map m.
void run_one(ch_engine *e, const PhaseRec &p, int c, const EvkMap<word> &m)
{
    auto &b = *e->boot;
    ConstContextPtr<word> cp = e->boot;
    Ct &mn = e->main[c], &rs = e->res[c], &cj = e->conj[c];
    auto &fft = fft_of(e);
    switch (p.kind) {
    case 0: { // Boot's steps 0 and 1: scale up, ModUpToMax, the trace (none at full slots)
        int half = e->param->degree_ / 2;
        b.MultUnsafe(mn, e->in[c], b.GetScaleUpConst(), -1);
        b.ModUpToMax(mn, mn, m);
        mn.SetNumSlots(half);
        b.Trace(mn, e->num_slots, half / e->num_slots, mn, m);
        mn.SetNumSlots(e->num_slots);
        break;
    }
    case 1: { // a transform's baby steps (CoeffToSlot on main, SlotToCoeff on res)
        auto &t = p.stc ? fft.stc_phases_.at(p.sub) : fft.cts_phases_.at(p.sub);
        e->bs[c].clear();
        t.hoist_.EvaluateBabyStep(cp, e->bs[c], p.stc ? rs : mn, m, false);
        break;
    }
    case 2: { // its giant steps, which end the transform
        auto &t = p.stc ? fft.stc_phases_.at(p.sub) : fft.cts_phases_.at(p.sub);
        t.hoist_.EvaluateGiantStep(cp, p.stc ? rs : mn, e->bs[c], m, false);
        e->bs[c].clear();
        if (p.stc && p.sub + 1 == (int)fft.stc_phases_.size()) {
            rs.SetNumSlots(e->num_slots); // Boot's closing metadata
            rs.SetScale(e->scale_end);
        }
        break;
    }
    case 4: { // one giant step of a transform (Cheddar's optimized giant steps, in parts)
        auto &t = p.stc ? fft.stc_phases_.at(p.sub) : fft.cts_phases_.at(p.sub);
        giant_step(e, t.hoist_, p, c, p.stc ? rs : mn, m);
        if (p.last && p.stc && p.sub + 1 == (int)fft.stc_phases_.size()) {
            rs.SetNumSlots(e->num_slots);
            rs.SetScale(e->scale_end);
        }
        break;
    }
    default: // step 3 at full slots: real and imaginary parts through EvalMod
        mn.SetScale(b.GetEvalModStartScale());
        b.HConj(cj, mn, m.GetConjugationKey());
        b.Add(rs, mn, cj);
        b.Sub(cj, cj, mn);
        b.MultImaginaryUnit(cj, cj);
        b.EvaluateMod(rs, rs, m.GetMultiplicationKey());
        b.EvaluateMod(cj, cj, m.GetMultiplicationKey());
        b.MultImaginaryUnit(cj, cj);
        b.Add(rs, rs, cj);
        break;
    }
}

int check_batch(ch_engine *e, int B, char *msg, size_t n)
{
    if (B < 1 || B > e->batch_max)
        return fail(msg, n, "batch of %d: the engine holds %d inputs", B, e->batch_max);
    return 0;
}

} // namespace

extern "C" int ch_reference(ch_engine *e, int B, double *ms, char *msg, size_t n)
{
    if (check_batch(e, B, msg, n))
        return -1;
    if (e->keys_exported)
        return fail(msg, n, "the reference needs Cheddar's own resident keys: run it before "
                            "exporting them");
    cudaEvent_t a, z;
    CU(cudaEventCreate(&a), "cudaEventCreate");
    CU(cudaEventCreate(&z), "cudaEventCreate");
    CU(cudaEventRecord(a, cudaStreamLegacy), "cudaEventRecord");
    for (int c = 0; c < B; c++)
        e->boot->Boot(e->res[c], e->in[c], e->ui->GetEvkMap(), false);
    CU(cudaEventRecord(z, cudaStreamLegacy), "cudaEventRecord");
    int r = events_ms(a, z, ms);
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    if (r)
        return fail(msg, n, "Cheddar's Boot: %s", cudaGetErrorString(cudaGetLastError()));
    for (int c = 0; c < B; c++)
        put_words(e->ref[c], e->res[c]);
    CU(cudaGetLastError(), "Cheddar's Boot");
    return 0;
}

extern "C" int ch_minks(ch_engine *e, int B, double *ms, char *msg, size_t n)
{
    if (check_batch(e, B, msg, n))
        return -1;
    if (e->keys_exported)
        return fail(msg, n, "Min-KS reads Cheddar's own resident keys: run it before exporting "
                            "them");
    cudaEvent_t a, z;
    CU(cudaEventCreate(&a), "cudaEventCreate");
    CU(cudaEventCreate(&z), "cudaEventCreate");
    CU(cudaEventRecord(a, cudaStreamLegacy), "cudaEventRecord");
    for (int c = 0; c < B; c++)
        e->boot->Boot(e->res[c], e->in[c], e->ui->GetEvkMap(), true);
    CU(cudaEventRecord(z, cudaStreamLegacy), "cudaEventRecord");
    int r = events_ms(a, z, ms);
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    if (r)
        return fail(msg, n, "Cheddar's Boot (Min-KS): %s", cudaGetErrorString(cudaGetLastError()));
    CU(cudaGetLastError(), "Cheddar's Boot (Min-KS)");
    return 0;
}

extern "C" int ch_minks_keys(const ch_engine *e, int *keys, int max, uint64_t *own_bytes)
{
    const Parameter<word> &pm = *e->param;
    EvkRequest req;
    e->boot->AddRequiredRotations(req, e->num_slots, true);
    int nk = 0;
    uint64_t own = 0;
    for (const auto &[rot, lvl] : req) {
        if (rot == 0)
            continue;
        auto it = e->key_of_index.find(rot < 0 ? -rot : rot);
        if (it == e->key_of_index.end() || nk == max)
            return -1;
        keys[nk++] = it->second;
        // the key Cheddar's key generation makes for (rot, lvl): the most main primes of
        // levels 0..lvl, every terminal prime, alpha special limbs
        int mm = 0;
        for (int l = 0; l <= lvl; l++)
            mm = std::max(mm, pm.LevelToNP(l).num_main_);
        int q = mm + pm.GetMaxNumTer(), beta = (q + pm.alpha_ - 1) / pm.alpha_;
        own += 2 * (uint64_t)beta * (q + pm.alpha_) * pm.degree_ * sizeof(word);
    }
    for (const auto &p : e->phases) // Boot's other keys: modup's and EvalMod's
        for (int k : p.kind == 0 || p.kind == 3 ? p.keys : std::vector<int>{}) {
            if (std::find(keys, keys + nk, k) != keys + nk)
                continue;
            if (nk == max)
                return -1;
            keys[nk++] = k;
            own += e->keys[k].info.bytes;
        }
    *own_bytes = own;
    return nk;
}

extern "C" int ch_batch_begin(ch_engine *e, int B, char *msg, size_t n)
{
    if (check_batch(e, B, msg, n))
        return -1;
    // the inputs are read, never written: nothing to reset but the results' metadata
    for (int c = 0; c < B; c++) {
        e->main[c].SetNumSlots(e->num_slots);
        e->res[c].SetNumSlots(e->num_slots);
    }
    return 0;
}

extern "C" int ch_batch_identical(ch_engine *e, int B, int *identical, char *msg, size_t n)
{
    if (check_batch(e, B, msg, n))
        return -1;
    CU(cudaDeviceSynchronize(), "the batch");
    int same = 1;
    std::vector<word> w;
    for (int c = 0; c < B; c++) {
        if (e->ref[c].empty())
            return fail(msg, n, "no reference for input %d (ch_reference first)", c);
        put_words(w, e->res[c]);
        same &= w == e->ref[c];
    }
    *identical = same;
    return 0;
}

extern "C" int ch_resident_batch(ch_engine *e, int B, double *ms, double *phase_ms,
                                 int *identical, char *msg, size_t n)
{
    if (check_batch(e, B, msg, n) || ch_batch_begin(e, B, msg, n))
        return -1;
    if (e->keys_exported)
        return fail(msg, n, "the resident batch needs Cheddar's own resident keys");
    size_t np = e->phases.size();
    std::vector<cudaEvent_t> ev(np + 1);
    for (auto &x : ev)
        CU(cudaEventCreate(&x), "cudaEventCreate");
    CU(cudaEventRecord(ev[0], cudaStreamLegacy), "cudaEventRecord");
    for (size_t p = 0; p < np; p++) {
        for (int c = 0; c < B; c++)
            run_one(e, e->phases[p], c, e->ui->GetEvkMap());
        CU(cudaEventRecord(ev[p + 1], cudaStreamLegacy), "cudaEventRecord");
    }
    int r = events_ms(ev[0], ev[np], ms);
    for (size_t p = 0; !r && p < np; p++)
        r = events_ms(ev[p], ev[p + 1], &phase_ms[p]);
    for (auto &x : ev)
        cudaEventDestroy(x);
    if (r)
        return fail(msg, n, "the resident batch: %s", cudaGetErrorString(cudaGetLastError()));
    return ch_batch_identical(e, B, identical, msg, n);
}

extern "C" int ch_export_keys(ch_engine *e, char *msg, size_t n)
{
    if (e->keys_exported)
        return 0;
    CU(cudaDeviceSynchronize(), "before the export");
    // the map is the user interface's own object (not const): the export empties it
    auto &m = const_cast<EvkMap<word> &>(e->ui->GetEvkMap());
    for (auto &k : e->keys) {
        const Evk &key = m.at(k.info.index);
        CU(cudaHostAlloc(&k.host, k.info.bytes, cudaHostAllocDefault), "cudaHostAlloc (keys)");
        char *h = static_cast<char *>(k.host);
        for (int i = 0; i < k.info.beta; i++) {
            CU(cudaMemcpy(h + (2 * i) * k.info.part_bytes, key.bx_[i].data(), k.info.part_bytes,
                          cudaMemcpyDeviceToHost), "export (b)");
            CU(cudaMemcpy(h + (2 * i + 1) * k.info.part_bytes, key.ax_[i].data(),
                          k.info.part_bytes, cudaMemcpyDeviceToHost), "export (a)");
        }
    }
    m.clear();
    CU(cudaDeviceSynchronize(), "the export");
    e->keys_exported = true;
    return 0;
}

extern "C" int ch_export_pts(ch_engine *e, char *msg, size_t n)
{
    if (e->pts_exported)
        return 0;
    CU(cudaDeviceSynchronize(), "before the export");
    for (auto &g : e->pts) {
        CU(cudaHostAlloc(&g.host, g.info.bytes, cudaHostAllocDefault), "cudaHostAlloc (pts)");
        for (size_t i = 0; i < g.pts.size(); i++) {
            CU(cudaMemcpy(static_cast<char *>(g.host) + i * g.info.diag_bytes,
                          g.pts[i]->mx_.data(), g.info.diag_bytes, cudaMemcpyDeviceToHost),
               "export (plaintext)");
            g.pts[i]->mx_ = DeviceVector<word>(0);
        }
    }
    CU(cudaDeviceSynchronize(), "the export");
    e->pts_exported = true;
    return 0;
}

namespace {

// Copies n bytes of the pinned export to dst on stream s: onto a device, a copy on the
// stream; into host memory (the pinned source fheplan loads a partial copy's limbs from)
// a copy on the host, in threads (CUDA runs a host-to-host copy synchronously, after the
// stream's earlier work, which would stall the VM's thread behind the transfers).
cudaError_t copy_out(void *dst, const void *src, size_t n, cudaStream_t s)
{
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, dst) != cudaSuccess)
        return cudaGetLastError();
    if (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged)
        return cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s);
    const size_t chunk = (size_t)16 << 20;
    size_t nt = std::min<size_t>((n + chunk - 1) / chunk, 8);
    std::vector<std::thread> th;
    for (size_t t = 1; t < nt; t++) {
        size_t a = n * t / nt, b = n * (t + 1) / nt;
        th.emplace_back([=] { memcpy((char *)dst + a, (const char *)src + a, b - a); });
    }
    memcpy(dst, src, nt > 1 ? n / nt : n);
    for (auto &t : th)
        t.join();
    return cudaSuccess;
}

} // namespace

extern "C" int ch_load_key(ch_engine *e, int k, void *dst, uint64_t nbytes, void *stream,
                           char *msg, size_t n)
{
    if (k < 0 || k >= (int)e->keys.size())
        return fail(msg, n, "no key %d", k);
    const KeyRec &r = e->keys[k];
    if (!r.host)
        return fail(msg, n, "key %s is not exported", r.info.name);
    if (nbytes != r.info.bytes)
        return fail(msg, n, "key %s holds %llu bytes, the copy %llu", r.info.name,
                    (unsigned long long)r.info.bytes, (unsigned long long)nbytes);
    // the copy may be on the device or in pinned memory (a partial copy's whole source)
    CU(copy_out(dst, r.host, nbytes, (cudaStream_t)stream), "key copy");
    return 0;
}

extern "C" int ch_load_key_field(ch_engine *e, int k, int field, int held_q, void *dst,
                                 void *stream, char *msg, size_t n)
{
    if (k < 0 || k >= (int)e->keys.size())
        return fail(msg, n, "no key %d", k);
    const KeyRec &r = e->keys[k];
    if (!r.host)
        return fail(msg, n, "key %s is not exported", r.info.name);
    if (field < 0 || field >= 2 * r.info.beta || held_q < 1 || held_q > r.info.q)
        return fail(msg, n, "key %s: field %d holding %d q-limbs; it has %d fields of %d "
                    "q-limbs", r.info.name, field, held_q, 2 * r.info.beta, r.info.q);
    // q-limbs 0..held_q-1, then the special limbs from their place after all q q-limbs
    const char *src = static_cast<const char *>(r.host) + field * r.info.part_bytes;
    uint64_t lb = r.info.limb_bytes, qb = (uint64_t)held_q * lb;
    cudaStream_t s = (cudaStream_t)stream;
    CU(copy_out(dst, src, qb, s), "key copy (q-limbs)");
    CU(copy_out(static_cast<char *>(dst) + qb, src + (uint64_t)r.info.q * lb,
                (uint64_t)r.info.special * lb, s),
       "key copy (special limbs)");
    if (!stream)
        CU(cudaStreamSynchronize(s), "key copy");
    return 0;
}

extern "C" int ch_load_pt(ch_engine *e, int p, void *dst, uint64_t nbytes, void *stream,
                          char *msg, size_t n)
{
    if (p < 0 || p >= (int)e->pts.size())
        return fail(msg, n, "no plaintext group %d", p);
    const PtRec &r = e->pts[p];
    if (!r.host)
        return fail(msg, n, "plaintext group %d is not exported", p);
    if (nbytes != r.info.bytes)
        return fail(msg, n, "plaintext group %d holds %llu bytes, the copy %llu", p,
                    (unsigned long long)r.info.bytes, (unsigned long long)nbytes);
    CU(cudaMemcpyAsync(dst, r.host, nbytes, cudaMemcpyHostToDevice, (cudaStream_t)stream),
       "plaintext copy");
    return 0;
}

namespace {

// The phase's i-th key, built over its leased copy: Cheddar's EvaluationKey allocates b0
// a0 b1 a1 ... in that order, the fields' order in the copy, one field each. A partial copy (fewer
// q-limbs, fewer parts) is a key of those q-limbs: the kernels find the special limbs
// after the key's own q-limbs, and read only the q-limbs and parts the phase's level
// reaches, so its words are the full key's.
int bind_key(ch_engine *e, const PhaseRec &p, size_t i, const ch_key_copy *keys,
             EvkMap<word> &m, char *msg, size_t n)
{
    const KeyRec &k = e->keys[p.keys[i]];
    const ch_key_copy *c = keys ? &keys[i] : nullptr;
    if (!c || !c->nfields || !c->field[0])
        return fail(msg, n, "phase %s: no device copy of key %s", p.info.name, k.info.name);
    uint64_t lb = k.info.limb_bytes;
    int held_q = c->field_bytes % lb ? -1 : (int)(c->field_bytes / lb) - k.info.special;
    int held_parts = c->nfields / 2, need = p.limbs[i];
    int need_parts = (need + k.info.alpha - 1) / k.info.alpha;
    if (held_q < 1 || held_q > k.info.q || c->nfields % 2 || held_parts > k.info.beta ||
        c->nfields > CH_KEY_FIELDS)
        return fail(msg, n, "phase %s: the copy of key %s (%d fields of %llu bytes) is no "
                    "cut of its %d fields of %d q-limbs and %d special limbs", p.info.name,
                    k.info.name, c->nfields, (unsigned long long)c->field_bytes,
                    2 * k.info.beta, k.info.q, k.info.special);
    if (held_q < need || held_parts < need_parts)
        return fail(msg, n, "phase %s at level %d reads %d q-limbs of key %s in %d parts; "
                    "its copy holds %d in %d", p.info.name, p.info.level, need, k.info.name,
                    need_parts, held_q, held_parts);
    NPInfo np = held_q == k.info.q
                    ? k.np
                    : NPInfo(held_q - k.np.num_ter_, k.np.num_ter_, k.np.num_aux_);
    uint64_t bytes = (uint64_t)c->nfields * c->field_bytes;
    Binding bind(e->binder, c->field, c->nfields, (size_t)c->field_bytes);
    try {
        m.emplace(k.info.index, Evk(np, held_parts));
    } catch (const std::exception &ex) {
        return fail(msg, n, "phase %s, key %s: %s", p.info.name, k.info.name, ex.what());
    }
    if (bind.close() != 0)
        return fail(msg, n, "phase %s: key %s did not fill its %llu bytes", p.info.name,
                    k.info.name, (unsigned long long)bytes);
    return 0;
}

} // namespace

extern "C" int ch_run_phase(ch_engine *e, int ph, int B, const ch_key_copy *keys,
                            void *const *pt_ptr, char *msg, size_t n)
{
    if (ph < 0 || ph >= (int)e->phases.size())
        return fail(msg, n, "no phase %d", ph);
    if (check_batch(e, B, msg, n))
        return -1;
    const PhaseRec &p = e->phases[ph];
    if (!e->keys_exported) {
        for (int c = 0; c < B; c++)
            run_one(e, p, c, e->ui->GetEvkMap());
        return 0;
    }
    EvkMap<word> m;
    for (size_t i = 0; i < p.keys.size(); i++)
        if (bind_key(e, p, i, keys, m, msg, n))
            return -1;
    std::vector<Pt *> bound;
    if (e->pts_exported)
        for (int gi : p.pts) {
            PtRec &g = e->pts[gi];
            for (size_t i = 0; i < g.pts.size(); i++) {
                if (!pt_ptr || !pt_ptr[i]) {
                    for (Pt *q : bound)
                        q->mx_ = DeviceVector<word>(0);
                    return fail(msg, n, "phase %s: no device copy of diagonal %zu", p.info.name,
                                i);
                }
                Binding bind(e->binder, pt_ptr[i], g.info.diag_bytes);
                g.pts[i]->mx_ = DeviceVector<word>((int)g.words);
                bind.close();
                bound.push_back(g.pts[i]);
            }
        }
    for (int c = 0; c < B; c++)
        run_one(e, p, c, m);
    // the plaintexts let go of the leased copies (nothing is freed: the VM owns them)
    for (Pt *q : bound)
        q->mx_ = DeviceVector<word>(0);
    CU(cudaGetLastError(), p.info.name);
    return 0;
}

extern "C" int ch_seeded_parts(const ch_engine *e, int k, int *parts, int max)
{
    if (k < 0 || k >= (int)e->keys.size())
        return -1;
    const KeyRec &r = e->keys[k];
    int n = 0;
    for (int i = 0; i < r.info.beta && n < max; i++)
        if (!(r.info.index == EvkMap<word>::kSparseToDenseKeyIndex && i == 0))
            parts[n++] = i;
    return n;
}

extern "C" const void *ch_key_host(const ch_engine *e, int k)
{
    return k >= 0 && k < (int)e->keys.size() ? e->keys[k].host : nullptr;
}

extern "C" int ch_sample_a_range(ch_engine *e, int k, int part, void *dst, uint64_t nbytes,
                                 uint64_t offset, void *stream, char *msg, size_t n)
{
    if (k < 0 || k >= (int)e->keys.size())
        return fail(msg, n, "no key %d", k);
    const KeyRec &r = e->keys[k];
    if (part < 0 || part >= r.info.beta || nbytes % sizeof(word) || offset % sizeof(word) ||
        offset > r.info.part_bytes || nbytes > r.info.part_bytes - offset)
        return fail(msg, n, "key %s: bytes [%llu, +%llu) of part %d; it has %d parts of %llu "
                    "bytes (words of %zu)", r.info.name, (unsigned long long)offset,
                    (unsigned long long)nbytes, part, r.info.beta,
                    (unsigned long long)r.info.part_bytes, sizeof(word));
    CU(sample_a(static_cast<word *>(dst), e->param->GetPrimesPtr(r.np), offset / sizeof(word),
                nbytes / sizeof(word), e->param->degree_, r.info.index, part,
                (cudaStream_t)stream),
       "the a-half sampler");
    return 0;
}

extern "C" int ch_sample_a(ch_engine *e, int k, int part, void *dst, uint64_t nbytes,
                           void *stream, char *msg, size_t n)
{
    if (k >= 0 && k < (int)e->keys.size() && nbytes != e->keys[k].info.part_bytes)
        return fail(msg, n, "key %s: a half of %llu bytes, not %llu", e->keys[k].info.name,
                    (unsigned long long)nbytes, (unsigned long long)e->keys[k].info.part_bytes);
    return ch_sample_a_range(e, k, part, dst, nbytes, 0, stream, msg, n);
}

namespace {

// Adds to *mism the words of the nbytes at device dv that differ from want, to *checked
// all of them.
int compare_words(const void *dv, const word *want, uint64_t nbytes, std::vector<word> &got,
                  uint64_t *mism, uint64_t *checked, char *msg, size_t n)
{
    size_t nw = nbytes / sizeof(word);
    got.resize(nw);
    CU(cudaMemcpy(got.data(), dv, nbytes, cudaMemcpyDeviceToHost), "reading the sampler's output");
    for (size_t w = 0; w < nw; w++)
        *mism += got[w] != want[w];
    *checked += nw;
    return 0;
}

// The q-limb counts below its q at which the phases read key k: its partial copies.
std::vector<int> partial_limbs(const ch_engine *e, int k)
{
    std::vector<int> v;
    for (const auto &p : e->phases)
        for (size_t i = 0; i < p.keys.size(); i++)
            if (p.keys[i] == k && p.limbs[i] < e->keys[k].info.q &&
                std::find(v.begin(), v.end(), p.limbs[i]) == v.end())
                v.push_back(p.limbs[i]);
    return v;
}

// Part's a half of key k by range, into dv: as a copy of held_q q-limbs holds it (q-limbs
// 0..held_q-1, then the special limbs), and one range inside limbs 1 and 2; compared with
// the export.
int verify_ranges(ch_engine *e, int k, int part, const std::vector<int> &held, void *dv,
                  std::vector<word> &got, uint64_t *mism, uint64_t *checked, char *msg, size_t n)
{
    const KeyRec &r = e->keys[k];
    const char *half = static_cast<const char *>(r.host) + (2 * part + 1) * r.info.part_bytes;
    uint64_t lb = r.info.limb_bytes, sb = (uint64_t)r.info.special * lb;
    std::vector<word> want;
    for (int q : held) {
        uint64_t qb = (uint64_t)q * lb;
        if (ch_sample_a_range(e, k, part, dv, qb, 0, nullptr, msg, n) ||
            ch_sample_a_range(e, k, part, static_cast<char *>(dv) + qb, sb,
                              (uint64_t)r.info.q * lb, nullptr, msg, n))
            return -1;
        want.resize((qb + sb) / sizeof(word));
        memcpy(want.data(), half, qb);
        memcpy(reinterpret_cast<char *>(want.data()) + qb, half + (uint64_t)r.info.q * lb, sb);
        if (compare_words(dv, want.data(), qb + sb, got, mism, checked, msg, n))
            return -1;
    }
    uint64_t off = lb + 24, nb = lb + 20; // starts and ends inside a limb
    if (off + nb > r.info.part_bytes)
        return 0;
    if (ch_sample_a_range(e, k, part, dv, nb, off, nullptr, msg, n))
        return -1;
    return compare_words(dv, reinterpret_cast<const word *>(half + off), nb, got, mism, checked,
                         msg, n);
}

} // namespace

extern "C" int ch_verify_sampler(ch_engine *e, uint64_t *mismatched, uint64_t *checked,
                                 uint64_t *range_mismatched, uint64_t *range_checked,
                                 char *msg, size_t n)
{
    *mismatched = *checked = *range_mismatched = *range_checked = 0;
    if (!e->keys_exported)
        return fail(msg, n, "export the keys first");
    uint64_t most = 0;
    for (auto &k : e->keys)
        most = std::max(most, k.info.part_bytes);
    void *dv = nullptr;
    CU(cudaMalloc(&dv, most), "cudaMalloc");
    std::vector<word> got;
    int rc = 0;
    for (int k = 0; k < (int)e->keys.size() && !rc; k++) {
        const KeyRec &r = e->keys[k];
        int parts[CH_MAX_PARTS];
        int np = ch_seeded_parts(e, k, parts, CH_MAX_PARTS);
        std::vector<int> held = partial_limbs(e, k);
        for (int i = 0; i < np && !rc; i++) {
            const word *want = reinterpret_cast<const word *>(
                static_cast<const char *>(r.host) + (2 * parts[i] + 1) * r.info.part_bytes);
            rc = ch_sample_a(e, k, parts[i], dv, r.info.part_bytes, nullptr, msg, n);
            if (!rc)
                rc = compare_words(dv, want, r.info.part_bytes, got, mismatched, checked, msg, n);
            if (!rc)
                rc = verify_ranges(e, k, parts[i], held, dv, got, range_mismatched,
                                   range_checked, msg, n);
        }
    }
    cudaFree(dv);
    return rc;
}

extern "C" int ch_result_error(ch_engine *e, double *snr, double *max_err, char *msg, size_t n)
{
    CU(cudaDeviceSynchronize(), "the batch");
    Pt p;
    e->ui->Decrypt(p, e->res[0]);
    std::vector<Complex> got;
    e->boot->encoder_.Decode(got, p);
    const auto &want = e->msgs[0];
    if (got.size() != want.size())
        return fail(msg, n, "decoded %zu slots, expected %zu", got.size(), want.size());
    double sig = 0, err = 0, mx = 0;
    for (size_t i = 0; i < want.size(); i++) {
        Complex d = want[i] - got[i];
        sig += std::norm(want[i]);
        err += std::norm(d);
        mx = std::max(mx, std::max(std::fabs(d.real()), std::fabs(d.imag())));
    }
    *snr = err > 0 ? sig / err : 0;
    *max_err = mx;
    return 0;
}

extern "C" void ch_pool_marks(const ch_engine *e, uint64_t *now, uint64_t *peak)
{
    *now = e->binder ? e->binder->now() : 0;
    *peak = e->binder ? e->binder->peak() : 0;
}

extern "C" void ch_pool_reset_peak(ch_engine *e)
{
    if (e->binder)
        e->binder->reset_peak();
}
