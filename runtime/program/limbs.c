/* runtime/program/limbs.c — limb-cut values (`limbs(Q, K, P)`, rplan(5)): the fields a cut
 * applies to, the layout of a device copy that holds only the limbs a level needs, and
 * the table check (bytecode.c picks the minor version a program is written as). */
#include <stdio.h>

#include "runtime/program/program.h"

uint32_t rp_value_nfields(const rp_value *v)
{
    return v->nfields ? v->nfields : v->seeded ? 2 : 1;
}

uint64_t rp_value_field_nbytes(const rplan_program *p, const rp_value *v, uint32_t k)
{
    if (v->nfields)
        return p->fields[v->field0 + k].nbytes;
    if (!v->seeded)
        return v->nbytes;
    uint64_t a = rp_regen_nbytes(v->nbytes); /* "b", then "a" */
    return k == 0 ? v->nbytes - a : a;
}

/* The bytes of field k in a copy that holds q-limbs 0..limbs-1 (limbs >= 1, a cut value):
 * 0 when its part is absent. */
static uint64_t cut_field_bytes(const rplan_program *p, const rp_value *v, uint32_t limbs,
                                uint32_t k)
{
    uint32_t nf = rp_value_nfields(v);
    uint32_t part = k / (nf / v->limb_parts);
    if ((uint64_t)part * rp_value_alpha(v) > limbs - 1)
        return 0;
    uint64_t limb = rp_value_field_nbytes(p, v, k) / (v->limb_q + v->limb_special);
    return limb * (limbs + v->limb_special);
}

uint64_t rp_value_cut_parts_nbytes(const rplan_program *p, const rp_value *v, uint32_t limbs,
                                   uint32_t parts)
{
    if (!limbs || !v->cut || !parts)
        return rp_value_cut_nbytes(p, v, limbs);
    uint32_t nf = rp_value_nfields(v);
    uint64_t n = 0;
    for (uint32_t k = 0; k < nf; k++)
        if (k / (nf / v->limb_parts) < parts)
            n += rp_value_field_nbytes(p, v, k) / (v->limb_q + v->limb_special) *
                 (limbs + v->limb_special);
    return n;
}

uint64_t rp_value_cut_nbytes(const rplan_program *p, const rp_value *v, uint32_t limbs)
{
    if (!limbs || !v->cut)
        return v->nbytes;
    uint64_t n = 0;
    for (uint32_t k = 0; k < rp_value_nfields(v); k++)
        n += cut_field_bytes(p, v, limbs, k);
    return n;
}

void rp_value_cut_field(const rplan_program *p, const rp_value *v, uint32_t limbs, uint32_t k,
                        uint64_t *offset, uint64_t *nbytes)
{
    uint64_t off = 0;
    for (uint32_t j = 0; j < k; j++)
        off += limbs && v->cut ? cut_field_bytes(p, v, limbs, j) : rp_value_field_nbytes(p, v, j);
    *offset = off;
    *nbytes = limbs && v->cut ? cut_field_bytes(p, v, limbs, k) : rp_value_field_nbytes(p, v, k);
}

int rp_check_cut(const rplan_program *p, uint32_t i, char *msg, size_t cap)
{
    const rp_value *v = &p->vals[i];
    if (!v->cut)
        return 1;
    uint32_t nf = rp_value_nfields(v);
    if (v->limb_q == 0 || v->limb_q > RP_MAX_LIMBS || v->limb_special > RP_MAX_LIMBS) {
        snprintf(msg, cap, "value %u: limb cut of %u q-limbs and %u special limbs (q from 1 "
                 "to %u, special at most %u)", i, v->limb_q, v->limb_special, RP_MAX_LIMBS,
                 RP_MAX_LIMBS);
        return 0;
    }
    if (v->limb_parts == 0 || nf % v->limb_parts) {
        snprintf(msg, cap, "value %u: limb cut of %u parts does not divide its %u fields", i,
                 v->limb_parts, nf);
        return 0;
    }
    uint64_t alpha = rp_value_alpha(v);
    if (alpha * (v->limb_parts - 1) >= v->limb_q || alpha * v->limb_parts < v->limb_q) {
        snprintf(msg, cap, "value %u: limb cut of %u parts of %llu q-limbs does not cover its "
                 "%u q-limbs", i, v->limb_parts, (unsigned long long)alpha, v->limb_q);
        return 0;
    }
    uint32_t per = v->limb_q + v->limb_special;
    for (uint32_t k = 0; k < nf; k++)
        if (rp_value_field_nbytes(p, v, k) % per) {
            snprintf(msg, cap, "value %u: field %u of %llu bytes is not %u limbs of equal size",
                     i, k, (unsigned long long)rp_value_field_nbytes(p, v, k), per);
            return 0;
        }
    return 1;
}
