/* cuda/kernels_stub.c — the kernels.h ABI in a build without CUDA: every call fails. */
#include "cuda/kernels.h"
#include "base/error.h"

#if !FHEPLAN_HAVE_CUDA
static fhr_status no_cuda(fhr_error *err)
{
    return fhr_fail(err, FHR_E_UNSUPPORTED, "cuda kernels: this build has no CUDA support");
}
fhr_status fhk_synth_fill(fhr_stream *s, void *d, size_t n, uint64_t seed, fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)seed;
    return no_cuda(err);
}
fhr_status fhk_zero(fhr_stream *s, void *d, size_t n, fhr_error *err)
{
    (void)s; (void)d; (void)n;
    return no_cuda(err);
}
fhr_status fhk_touch(fhr_stream *s, const void *d, size_t n, uint64_t *sink, fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)sink;
    return no_cuda(err);
}
fhr_status fhk_verify(fhr_stream *s, const void *d, size_t n, int synth, uint64_t seed,
                      unsigned long long *mismatches, fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)synth; (void)seed; (void)mismatches;
    return no_cuda(err);
}
fhr_status fhk_spin(fhr_stream *s, uint64_t ns, fhr_error *err)
{
    (void)s; (void)ns;
    return no_cuda(err);
}
fhr_status fhk_keyswitch(fhr_stream *s, const uint64_t *ct, size_t nct, const uint64_t *key,
                         size_t nkey, uint64_t *acc, size_t nacc, uint32_t repeat, fhr_error *err)
{
    (void)s; (void)ct; (void)nct; (void)key; (void)nkey; (void)acc; (void)nacc; (void)repeat;
    return no_cuda(err);
}
fhr_status fhk_counter_fill(fhr_stream *s, void *d, size_t n, uint64_t key, fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)key;
    return no_cuda(err);
}
fhr_status fhk_counter_fill_at(fhr_stream *s, void *d, size_t n, uint64_t key, uint64_t w0,
                               fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)key; (void)w0;
    return no_cuda(err);
}
fhr_status fhk_verify_at(fhr_stream *s, const void *d, size_t n, int synth, uint64_t seed,
                         uint64_t w0, unsigned long long *mismatches, fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)synth; (void)seed; (void)w0; (void)mismatches;
    return no_cuda(err);
}
fhr_status fhk_counter_verify_at(fhr_stream *s, const void *d, size_t n, uint64_t key,
                                 uint64_t w0, unsigned long long *mismatches, fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)key; (void)w0; (void)mismatches;
    return no_cuda(err);
}
fhr_status fhk_counter_verify(fhr_stream *s, const void *d, size_t n, uint64_t key,
                              unsigned long long *mismatches, fhr_error *err)
{
    (void)s; (void)d; (void)n; (void)key; (void)mismatches;
    return no_cuda(err);
}
#else
typedef int fhk_stub_unused;
#endif
