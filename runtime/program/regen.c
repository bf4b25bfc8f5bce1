/* runtime/program/regen.c — seeded values in the program: the size of the regenerated
 * half, the per-location charge the verifier's dry run uses, and the table checks. */
#include "runtime/program/program.h"

#include <stdio.h>
#include <string.h>

uint64_t rp_regen_nbytes(uint64_t nbytes) { return nbytes / 16 * 8; }

uint64_t rp_value_regen(const rplan_program *p, const rp_value *v)
{
    if (!v->seeded)
        return 0;
    if (!v->nfields)
        return rp_regen_nbytes(v->nbytes);
    uint64_t n = 0;
    for (uint32_t k = 0; k < v->nfields; k++)
        if (p->fields[v->field0 + k].regen)
            n += p->fields[v->field0 + k].nbytes;
    return n;
}

uint64_t rp_value_charge(const rplan_program *p, const rp_value *v, uint8_t slot)
{
    if (!v->seeded || slot >= 2)
        return v->nbytes;
    unsigned bit = slot == 0 ? FHR_KEEP_HOST : FHR_KEEP_PINNED;
    return v->keep & bit ? v->nbytes : v->nbytes - rp_value_regen(p, v);
}

/* A generator name: identifiers (letter or '_' first) joined by single dots. */
static int gen_name_ok(const char *s)
{
    int start = 1;
    if (!*s || strlen(s) > 100)
        return 0;
    for (; *s; s++) {
        int alpha = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_';
        int digit = *s >= '0' && *s <= '9';
        if (*s == '.') {
            if (start)
                return 0;
            start = 1;
        } else if (alpha || (digit && !start)) {
            start = 0;
        } else {
            return 0;
        }
    }
    return !start;
}

int rp_check_seeded(const rplan_program *p, uint32_t i, char *msg, size_t cap)
{
    const rp_value *v = &p->vals[i];
    if (!v->seeded) {
        for (uint32_t k = 0; k < v->nfields; k++)
            if (p->fields[v->field0 + k].regen) {
                snprintf(msg, cap, "value %u: field %u is seeded, the value has no generator", i, k);
                return 0;
            }
        if (v->keep || v->gen || v->seed) {
            snprintf(msg, cap, "value %u: keep, generator or seed without a seeded field", i);
            return 0;
        }
        return 1;
    }
    if (v->seeded != 1 || (v->keep & ~(unsigned)(FHR_KEEP_HOST | FHR_KEEP_PINNED))) {
        snprintf(msg, cap, "value %u: bad seeded flag or keep bits", i);
        return 0;
    }
    if (v->gen >= p->nstrs || (v->gen && p->strs[v->gen - 1] != '\0') ||
        !memchr(p->strs + v->gen, '\0', p->nstrs - v->gen) || !gen_name_ok(p->strs + v->gen)) {
        snprintf(msg, cap, "value %u: bad generator name", i);
        return 0;
    }
    if (!v->nfields && rp_regen_nbytes(v->nbytes) == 0) {
        snprintf(msg, cap, "value %u: a seeded value needs at least 16 bytes", i);
        return 0;
    }
    if (v->nfields) { /* fields: some seeded, some stored */
        uint32_t nregen = 0;
        for (uint32_t k = 0; k < v->nfields; k++)
            nregen += p->fields[v->field0 + k].regen != 0;
        if (nregen == 0 || nregen == v->nfields) {
            snprintf(msg, cap, "value %u: a seeded value with fields has %s", i,
                     nregen ? "no stored field" : "no seeded field");
            return 0;
        }
    }
    return 1;
}
