#!/bin/sh
# examples/cheddar/patch-cheddar.sh DIR — the edits the example makes to a COPY of the
# user's Cheddar tree (build/cheddar/src), at build time. The user's own tree is never
# written: DIR must hold the .fheplan-copy stamp that the build's copy step leaves. Each
# edit is anchored on text that must be found exactly once; an anchor that is missing
# (another Cheddar version) stops the build with the file and the text named.
# Nothing is written unless every edit finds its anchor. Idempotent: an edit already
# present (its "fheplan" marker) is left as it is.
#
#  1. CMakeLists.txt: the CUDA architectures come from CHEDDAR_CUDA_ARCHITECTURES (default
#     90) instead of a fixed list that starts at sm_60, which CUDA 13 no longer compiles.
#  2. unittest/Testbed.h: the parameter folder may be given at run time (CHEDDAR_PARAM_DIR),
#     so that the test programs run from a bundle on another host.
#  3. include/extension/BootContext.h: Boot's phases (ModUpToMax, CoeffToSlot, EvaluateMod,
#     SlotToCoeff, GetBootEnabledNumSlots, ...) become public, with three accessors for what
#     Boot reads between them (the scale-up constant, EvalMod's start scale, the variant).
#  4. include/core/DeviceVector.h: a DeviceVector can be bound to device memory it does not
#     own (BoundMemoryResource: an rmm resource that hands out one given address and frees
#     nothing).
#  5. include/core/Container.h: EvaluationKey::BindParts(np, {b0, a0, b1, a1, ...}) makes a
#     key's parts those device addresses, allocating nothing; EvaluationKey::PartWords(np)
#     tells the words of one part.
#  6. include/extension/{BootContext,EvalSpecialFFT,LinearTransform,Hoist}.h: accessors down
#     to each CtS/StC phase's encoded diagonals (HoistHandler::GetPlaintexts), so that
#     their device memory can be rebound like a key's.
#  7. The members behind those accessors (EvalSpecialFFT::cts_phases_/stc_phases_,
#     LinearTransform::hoist_, HoistHandler::hoist_pt_map_) become public as well.
#  8. include/UserInterface.h, src/UserInterface.cu: UserInterface::evk_a_sampler_ (and its
#     context pointer), a hook through which key generation draws each key part's a half
#     on the device instead of from the host generator; unset, key generation is as given.
#  9. include/extension/Hoist.h: the steps inside the giant steps (the fused plaintext
#     accumulation, the final mod-down, the level) public, so that the adapter replays
#     the giant steps one key at a time.
# All edits but the eighth are inline code in headers or build files.
set -eu
dir=${1:?usage: patch-cheddar.sh CHEDDAR_SOURCE_COPY}
[ -f "$dir/include/extension/BootContext.h" ] && [ -f "$dir/include/core/Container.h" ] || {
    echo "patch-cheddar: $dir is not a Cheddar source tree (include/extension/BootContext.h, include/core/Container.h)" >&2
    exit 1
}
# Only a copy made by the build (mk/cheddar.mk leaves .fheplan-copy in it) is patched.
[ -f "$dir/.fheplan-copy" ] && [ ! -L "$dir" ] || {
    echo "patch-cheddar: $dir is not a build copy (no .fheplan-copy); the user's tree is never patched" >&2
    exit 1
}
exec python3 - "$dir" <<'PY'
import sys, os

root = sys.argv[1]
staged = {}  # file -> patched text; written only once every edit has found its anchor

def edit(rel, marker, old, new):
    path = os.path.join(root, rel)
    if rel in staged:
        text = staged[rel]
    else:
        with open(path) as f:
            text = f.read()
    if marker in text:
        return
    n = text.count(old)
    if n != 1:
        sys.exit("patch-cheddar: %s: expected text found %d times (need exactly once; "
                 "nothing was changed):\n%s" % (path, n, old))
    text = text.replace(old, new)
    if marker not in text:
        sys.exit("patch-cheddar: %s: edit lacks its marker %r" % (path, marker))
    staged[rel] = text

# 1. CUDA architectures.
edit("CMakeLists.txt", "CHEDDAR_CUDA_ARCHITECTURES",
     "set (CMAKE_CUDA_ARCHITECTURES 60 61 70 75 80 86 89 90)\n",
     "# fheplan build patch: architectures from the configure line (CUDA 13 has no sm_60/sm_70)\n"
     "set (CHEDDAR_CUDA_ARCHITECTURES 90 CACHE STRING \"CUDA architectures to build\")\n"
     "set (CMAKE_CUDA_ARCHITECTURES ${CHEDDAR_CUDA_ARCHITECTURES})\n")

# 2. Parameter folder at run time.
edit("unittest/Testbed.h", "CHEDDAR_PARAM_DIR",
     '    std::string json_path = std::string(PARAM_DIR) + "/" + GetParam();\n',
     '    // fheplan build patch: CHEDDAR_PARAM_DIR overrides the build-time folder\n'
     '    const char *param_dir = std::getenv("CHEDDAR_PARAM_DIR");\n'
     '    std::string json_path =\n'
     '        std::string(param_dir != nullptr ? param_dir : PARAM_DIR) + "/" + GetParam();\n')

# 3. Boot's phases public.
edit("include/extension/BootContext.h", "fheplan patch",
     "  BootContext(const Parameter<word> &, const BootParameter &);\n\n"
     "  int GetBootEnabledNumSlots(int num_slots) const;\n",
     "  BootContext(const Parameter<word> &, const BootParameter &);\n\n"
     " public:\n"
     "  // fheplan patch: Boot()'s phases, callable one by one, and what Boot() reads\n"
     "  // between them.\n"
     "  const Constant<word> &GetScaleUpConst() const { return scaleup_const_; }\n"
     "  double GetEvalModStartScale() const { return eval_mod_->start_scale_; }\n"
     "  BootVariant GetBootVariant(int num_slots) const {\n"
     "    return boot_variant_.at(num_slots);\n"
     "  }\n"
     "  int GetBootEnabledNumSlots(int num_slots) const;\n")

# 4. A DeviceVector over memory it does not own.
edit("include/core/DeviceVector.h", "BoundMemoryResource",
     "#include <rmm/device_uvector.hpp>\n\nnamespace cheddar {\n",
     "#include <rmm/device_uvector.hpp>\n"
     "#include <rmm/detail/error.hpp>\n"
     "#include <rmm/mr/device/device_memory_resource.hpp>\n"
     "#include <stdexcept>\n\n"
     "namespace cheddar {\n\n"
     "/**\n"
     " * @brief fheplan patch: an rmm memory resource that allocates nothing. Arm(ptr, bytes)\n"
     " * sets the address the calling thread's next allocation of at most that many bytes\n"
     " * returns; deallocation frees nothing (the memory belongs to whoever gave it).\n"
     " */\n"
     "class BoundMemoryResource final : public rmm::mr::device_memory_resource {\n"
     " public:\n"
     "  static BoundMemoryResource *Get() {\n"
     "    static BoundMemoryResource resource;\n"
     "    return &resource;\n"
     "  }\n"
     "  static std::size_t Arm(void *ptr, std::size_t bytes, std::size_t result) {\n"
     "    pending_ = ptr;\n"
     "    pending_bytes_ = bytes;\n"
     "    return result;\n"
     "  }\n"
     "  bool supports_streams() const noexcept override { return true; }\n"
     "  bool supports_get_mem_info() const noexcept override { return false; }\n\n"
     " private:\n"
     "  static inline thread_local void *pending_ = nullptr;\n"
     "  static inline thread_local std::size_t pending_bytes_ = 0;\n"
     "  void *do_allocate(std::size_t bytes, rmm::cuda_stream_view) override {\n"
     "    void *ptr = pending_;\n"
     "    // rmm pads each request to a multiple of 8 bytes\n"
     "    if (ptr == nullptr || bytes > ((pending_bytes_ + 7) & ~std::size_t{7})) {\n"
     "      throw rmm::bad_alloc(\"BoundMemoryResource: no bound address for this size\");\n"
     "    }\n"
     "    pending_ = nullptr;\n"
     "    pending_bytes_ = 0;\n"
     "    return ptr;\n"
     "  }\n"
     "  void do_deallocate(void *, std::size_t, rmm::cuda_stream_view) override {}\n"
     "  bool do_is_equal(const rmm::mr::device_memory_resource &other) const noexcept override {\n"
     "    return this == &other;\n"
     "  }\n"
     "  std::pair<std::size_t, std::size_t> do_get_mem_info(\n"
     "      rmm::cuda_stream_view) const override {\n"
     "    return {0, 0};\n"
     "  }\n"
     "};\n")
edit("include/core/DeviceVector.h", "fheplan patch: a DeviceVector over",
     "  explicit DeviceVector(int size = 0, cudaStream_t stream = cudaStreamLegacy);\n",
     "  explicit DeviceVector(int size = 0, cudaStream_t stream = cudaStreamLegacy);\n\n"
     "  // fheplan patch: a DeviceVector over size words at bound, which it does not own\n"
     "  // (its destruction frees nothing; resize() on it fails).\n"
     "  DeviceVector(word *bound, int size, cudaStream_t stream)\n"
     "      : Base(BoundMemoryResource::Arm(bound, sizeof(word) * size, size), stream,\n"
     "             BoundMemoryResource::Get()) {}\n")

# 5. An EvaluationKey over leased memory.
edit("include/core/Container.h", "BindParts",
     "  std::vector<DeviceVector<word>> bx_;\n"
     "  std::vector<DeviceVector<word>> ax_;\n",
     "  std::vector<DeviceVector<word>> bx_;\n"
     "  std::vector<DeviceVector<word>> ax_;\n\n"
     "  /**\n"
     "   * @brief fheplan patch: the words of one polynomial (bx_[i] or ax_[i]) of a key\n"
     "   * over num_primes.\n"
     "   */\n"
     "  static std::size_t PartWords(const NPInfo &num_primes) {\n"
     "    return static_cast<std::size_t>(num_primes.GetNumTotal()) * Base::degree_;\n"
     "  }\n\n"
     "  /**\n"
     "   * @brief fheplan patch: makes the key's polynomials the device memory at parts =\n"
     "   * {b0, a0, b1, a1, ...} (beta = parts.size() / 2, each PartWords(num_primes)\n"
     "   * words), which the key does not own: nothing is allocated or copied, and the\n"
     "   * key's own former memory (if any) goes back to the pool. Rebinding or destroying\n"
     "   * the key frees nothing of the bound memory.\n"
     "   */\n"
     "  void BindParts(const NPInfo &num_primes, const std::vector<word *> &parts,\n"
     "                 cudaStream_t stream = cudaStreamLegacy) {\n"
     "    if (parts.size() % 2 != 0) {\n"
     "      throw std::invalid_argument(\"EvaluationKey::BindParts: odd number of parts\");\n"
     "    }\n"
     "    const int size = static_cast<int>(PartWords(num_primes));\n"
     "    std::vector<DeviceVector<word>> bx, ax;\n"
     "    for (std::size_t i = 0; i < parts.size(); i += 2) {\n"
     "      bx.emplace_back(parts[i], size, stream);\n"
     "      ax.emplace_back(parts[i + 1], size, stream);\n"
     "    }\n"
     "    bx_ = std::move(bx);\n"
     "    ax_ = std::move(ax);\n"
     "    this->num_primes_ = num_primes;\n"
     "  }\n")

# 6. The diagonals of CtS and StC (device Plaintexts in each phase's HoistHandler),
#    reachable for rebinding, phase by phase.
edit("include/extension/BootContext.h", "GetEvalSpecialFFT",
     "  int GetBootEnabledNumSlots(int num_slots) const;\n",
     "  EvalSpecialFFT<word> &GetEvalSpecialFFT(int num_slots) {\n"
     "    return eval_fft_.at(num_slots);\n"
     "  }\n"
     "  int GetBootEnabledNumSlots(int num_slots) const;\n")
edit("include/extension/EvalSpecialFFT.h", "fheplan patch",
     "                 int num_slots, double cts_const, double stc_const);\n",
     "                 int num_slots, double cts_const, double stc_const);\n\n"
     "  // fheplan patch: the phases of CoeffToSlot and SlotToCoeff, in order of use\n"
     "  std::vector<LinearTransform<word>> &GetCtSPhases() { return cts_phases_; }\n"
     "  std::vector<LinearTransform<word>> &GetStCPhases() { return stc_phases_; }\n"
     "  bool IsFullSlot() const { return full_slot_; }\n")
edit("include/extension/LinearTransform.h", "fheplan patch",
     "  int GetPreRotationAmount() const;\n",
     "  int GetPreRotationAmount() const;\n"
     "  // fheplan patch: the hoisting handler that holds this phase's diagonals\n"
     "  HoistHandler<word> &GetHoistHandler() { return hoist_; }\n")
edit("include/extension/Hoist.h", "fheplan patch",
     "  void AddRequiredRotations(EvkRequest &req, bool min_ks = false) const;\n",
     "  // fheplan patch: the encoded diagonals, [giant step][baby step] -> Plaintext\n"
     "  // (device memory in mx_), and the baby/giant-step rotation indices\n"
     "  std::map<int, std::map<int, Pt>> &GetPlaintexts() { return hoist_pt_map_; }\n"
     "  const std::set<int> &GetBSIndices() const { return bs_indices_; }\n"
     "  const std::vector<int> &GetGSIndices() const { return gs_indices_; }\n\n"
     "  void AddRequiredRotations(EvkRequest &req, bool min_ks = false) const;\n")

# 7. The same members public, for code that names them directly.
edit("include/extension/EvalSpecialFFT.h", "fheplan patch: public phases",
     "  std::vector<LinearTransform<word>> cts_phases_;\n"
     "  std::vector<LinearTransform<word>> stc_phases_;\n",
     " public:  // fheplan patch: public phases\n"
     "  std::vector<LinearTransform<word>> cts_phases_;\n"
     "  std::vector<LinearTransform<word>> stc_phases_;\n\n"
     " private:\n")
edit("include/extension/LinearTransform.h", "fheplan patch: public hoist_",
     "  HoistHandler<word> hoist_;\n",
     " public:  // fheplan patch: public hoist_\n"
     "  HoistHandler<word> hoist_;\n\n"
     " private:\n")
edit("include/extension/Hoist.h", "fheplan patch: public hoist_pt_map_",
     "  std::map<int, std::map<int, Pt>> hoist_pt_map_;\n",
     " public:  // fheplan patch: public hoist_pt_map_\n"
     "  std::map<int, std::map<int, Pt>> hoist_pt_map_;\n\n"
     " private:\n")

# 9. The steps inside the giant steps public, so that an owner can replay them one
#    giant-step key at a time: the fused plaintext accumulation, the final mod-down, and
#    the level and fusion limit they read.
edit("include/extension/Hoist.h", "fheplan patch: the giant steps in parts",
     "  void GSFusedPAccum(ConstContextPtr<word> context, std::map<int, Ct> &results,\n",
     " public:  // fheplan patch: the giant steps in parts\n"
     "  int GetPtLevel() const { return pt_level_; }\n"
     "  static constexpr int GetMaxLogBS() { return max_log_bs_; }\n"
     "  void GSFusedPAccum(ConstContextPtr<word> context, std::map<int, Ct> &results,\n")
edit("include/extension/Hoist.h", " private:  // fheplan patch: end of the giant steps in parts",
     "  void EvaluateMinKSBabyStep(ConstContextPtr<word> context,\n",
     " private:  // fheplan patch: end of the giant steps in parts\n"
     "  void EvaluateMinKSBabyStep(ConstContextPtr<word> context,\n")

# 8. A hook for the a halves of key generation (test-side key generation only).
edit("include/UserInterface.h", "evk_a_sampler_",
     "  void PrepareRotationKey(const EvkRequest &evk_request);\n",
     "  void PrepareRotationKey(const EvkRequest &evk_request);\n\n"
     "  // fheplan patch: when set, key generation draws each key part's a half through\n"
     "  // this sampler instead of the host generator: sampler(ctx, dst, primes,\n"
     "  // num_primes, degree, key_idx, part) writes num_primes * degree words at the\n"
     "  // device address dst, word j of prime slot p uniform modulo primes[p] (a device\n"
     "  // array in the key's slot order), on the legacy default stream.\n"
     "  using EvkASampler = void (*)(void *ctx, word *dst, const word *primes,\n"
     "                               int num_primes, int degree, int key_idx, int part);\n"
     "  static inline EvkASampler evk_a_sampler_ = nullptr;\n"
     "  static inline void *evk_a_sampler_ctx_ = nullptr;\n")
edit("src/UserInterface.cu", "evk_a_sampler_",
     "    SampleRandomPolynomial(evk.ax_.at(i), np);\n",
     "    // fheplan patch: the a half from the installed sampler, if any\n"
     "    if (evk_a_sampler_ != nullptr) {\n"
     "      evk_a_sampler_(evk_a_sampler_ctx_, evk.ax_.at(i).data(), primes,\n"
     "                     np.GetNumTotal(), degree, key_idx, i);\n"
     "    } else {\n"
     "      SampleRandomPolynomial(evk.ax_.at(i), np);\n"
     "    }\n")

for rel, text in staged.items():
    path = os.path.join(root, rel)
    with open(path + ".fheplan.tmp", "w") as f:
        f.write(text)
    os.replace(path + ".fheplan.tmp", path)
if staged:
    print("patch-cheddar: patched " + ", ".join(sorted(staged)) + " in " + root)
PY
