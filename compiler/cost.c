/* compiler/cost.c — the CKKS cost model behind the built-in size functions
 * (ciphertext, plaintext, switching_key and the workspace estimates); rplan(5)
 * writes the formulas down. All arithmetic is overflow-checked uint64. */
#include "fheplan/rplan.h"

static int mul(uint64_t a, uint64_t b, uint64_t *o)
{
    return !__builtin_mul_overflow(a, b, o);
}

static int mul4(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t *o)
{
    uint64_t t, u;
    return mul(a, b, &t) && mul(t, c, &u) && mul(u, d, o);
}

static fhr_status check(uint64_t n, uint64_t level)
{
    if (n < 1024 || n > 131072 || (n & (n - 1)) != 0 || level > 100)
        return FHR_E_INVALID;
    return FHR_OK;
}

fhr_status rplan_ckks_ciphertext(uint64_t n, uint64_t level, uint64_t *out)
{
    fhr_status st = check(n, level);
    if (st)
        return st;
    return mul4(2, level + 1, n, 8, out) ? FHR_OK : FHR_E_BUDGET;
}

fhr_status rplan_ckks_plaintext(uint64_t n, uint64_t level, uint64_t *out)
{
    fhr_status st = check(n, level);
    if (st)
        return st;
    return mul4(1, level + 1, n, 8, out) ? FHR_OK : FHR_E_BUDGET;
}

/* Limbs of the extended basis during key switching: (level+1) + K, K = ceil((level+1)/dnum). */
static fhr_status ext_limbs(uint64_t n, uint64_t level, uint64_t dnum, uint64_t *out)
{
    fhr_status st = check(n, level);
    if (st)
        return st;
    if (dnum == 0 || dnum > level + 1)
        return FHR_E_INVALID;
    uint64_t k = (level + 1 + dnum - 1) / dnum;
    *out = level + 1 + k;
    return FHR_OK;
}

fhr_status rplan_ckks_switching_key(uint64_t n, uint64_t level, uint64_t dnum, uint64_t *out)
{
    uint64_t ext;
    fhr_status st = ext_limbs(n, level, dnum, &ext);
    if (st)
        return st;
    uint64_t t;
    return mul(dnum, 2, &t) && mul4(t, ext, n, 8, out) ? FHR_OK : FHR_E_BUDGET;
}

/* ModUp'd digits dnum·(l+1+K)·N·8 plus two accumulators 2·(l+1+K)·N·8. */
fhr_status rplan_ckks_keyswitch_workspace(uint64_t n, uint64_t level, uint64_t dnum,
                                          uint64_t *out)
{
    uint64_t ext;
    fhr_status st = ext_limbs(n, level, dnum, &ext);
    if (st)
        return st;
    return mul4(dnum + 2, ext, n, 8, out) ? FHR_OK : FHR_E_BUDGET;
}
