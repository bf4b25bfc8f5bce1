/* runtime/program/program.c — the in-memory program: builders with de-duplicated strings
 * and constants, release, the opcode table, and the read-only inspection API. */
#include <stdlib.h>
#include <string.h>

#include "runtime/program/program.h"

const rp_opinfo rp_ops[RPLAN_OP_COUNT_] = {
#define OP(id, text, x, y, a, b, ctx, rule)                                             \
    [RPLAN_OP_##id] = {text, RPLAN_OPD_##x, RPLAN_OPD_##y, RPLAN_OPD_##a, RPLAN_OPD_##b,    \
                       CTX_##ctx},
#include "runtime/program/opcodes.def"
#undef OP
};

int rplan_opcode_count(void) { return RPLAN_OP_COUNT_; }

const char *rplan_opcode_name(int op)
{
    return op >= 0 && op < RPLAN_OP_COUNT_ ? rp_ops[op].name : "?";
}

rplan_program *rp_prog_new(void)
{
    rplan_program *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->minor = RP_MINOR;
    uint32_t off;
    if (!rp_prog_str(p, "", 0, &off)) { /* offset 0 is always "" */
        rplan_program_free(p);
        return NULL;
    }
    return p;
}

void rp_prog_drop_build_tables(rplan_program *p)
{
    free(p->strhash);
    free(p->conhash);
    p->strhash = p->conhash = NULL;
    p->strhcap = p->conhcap = p->nstrhash = 0;
}

void rplan_program_free(rplan_program *p)
{
    if (!p)
        return;
    rp_prog_drop_build_tables(p);
    free(p->strs);
    free(p->cons);
    free(p->vals);
    free(p->buds);
    free(p->pols);
    free(p->chains);
    free(p->fields);
    free(p->kerns);
    free(p->code);
    free(p->lines);
    free(p->src);
    free(p);
}

static int grow(void **v, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    uint64_t nc = *cap ? (uint64_t)*cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    if (nc > UINT32_MAX)
        return 0;
    void *nv = realloc(*v, (size_t)nc * elem);
    if (!nv)
        return 0;
    *v = nv;
    *cap = (uint32_t)nc;
    return 1;
}

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Open addressing; slots hold offset+1 (0 = empty). */
static int str_rehash(rplan_program *p, uint32_t ncap)
{
    uint32_t *t = calloc(ncap, sizeof *t);
    if (!t)
        return 0;
    for (uint32_t i = 0; i < p->strhcap; i++) {
        uint32_t o = p->strhash[i];
        if (!o)
            continue;
        const char *s = p->strs + o - 1;
        uint32_t h = hash_bytes(s, strlen(s)) & (ncap - 1);
        while (t[h])
            h = (h + 1) & (ncap - 1);
        t[h] = o;
    }
    free(p->strhash);
    p->strhash = t;
    p->strhcap = ncap;
    return 1;
}

int rp_prog_str(rplan_program *p, const char *s, size_t n, uint32_t *out)
{
    if (memchr(s, '\0', n))
        n = strlen(s);
    if ((p->nstrhash + 1) * 2 > p->strhcap && !str_rehash(p, p->strhcap ? p->strhcap * 2 : 256))
        return 0;
    uint32_t h = hash_bytes(s, n) & (p->strhcap - 1);
    while (p->strhash[h]) {
        const char *c = p->strs + p->strhash[h] - 1;
        if (strncmp(c, s, n) == 0 && c[n] == '\0') {
            *out = p->strhash[h] - 1;
            return 1;
        }
        h = (h + 1) & (p->strhcap - 1);
    }
    if ((uint64_t)p->nstrs + n + 1 > UINT32_MAX / 2)
        return 0;
    if (!grow((void **)&p->strs, &p->capstrs, p->nstrs + (uint32_t)n + 1, 1))
        return 0;
    memcpy(p->strs + p->nstrs, s, n);
    p->strs[p->nstrs + n] = '\0';
    *out = p->nstrs;
    p->strhash[h] = p->nstrs + 1;
    p->nstrhash++;
    p->nstrs += (uint32_t)n + 1;
    return 1;
}

static uint32_t hash_u64(uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdull;
    v ^= v >> 33;
    return (uint32_t)v;
}

int rp_prog_const(rplan_program *p, uint64_t v, uint32_t *out)
{
    if ((p->ncons + 1) * 2 > p->conhcap) {
        uint32_t ncap = p->conhcap ? p->conhcap * 2 : 256;
        uint32_t *t = calloc(ncap, sizeof *t);
        if (!t)
            return 0;
        for (uint32_t i = 0; i < p->ncons; i++) {
            uint32_t h = hash_u64(p->cons[i]) & (ncap - 1);
            while (t[h])
                h = (h + 1) & (ncap - 1);
            t[h] = i + 1;
        }
        free(p->conhash);
        p->conhash = t;
        p->conhcap = ncap;
    }
    uint32_t h = hash_u64(v) & (p->conhcap - 1);
    while (p->conhash[h]) {
        if (p->cons[p->conhash[h] - 1] == v) {
            *out = p->conhash[h] - 1;
            return 1;
        }
        h = (h + 1) & (p->conhcap - 1);
    }
    if (!grow((void **)&p->cons, &p->capcons, p->ncons + 1, sizeof *p->cons))
        return 0;
    p->cons[p->ncons] = v;
    p->conhash[h] = p->ncons + 1;
    *out = p->ncons++;
    return 1;
}

int rp_prog_emit(rplan_program *p, rp_ins in, rp_linerec ln)
{
    uint32_t cap = p->capcode;
    if (p->ncode + 1 > cap) {
        uint32_t c2 = cap;
        if (!grow((void **)&p->code, &c2, p->ncode + 1, sizeof *p->code))
            return 0;
        if (!grow((void **)&p->lines, &cap, p->ncode + 1, sizeof *p->lines))
            return 0;
        p->capcode = c2 < cap ? c2 : cap;
    }
    p->code[p->ncode] = in;
    p->lines[p->ncode] = ln;
    p->ncode++;
    return 1;
}

int rp_prog_field(rplan_program *p, rp_fieldrec f)
{
    if (!grow((void **)&p->fields, &p->capfields, p->nfields + 1, sizeof *p->fields))
        return 0;
    p->fields[p->nfields++] = f;
    return 1;
}

int rp_prog_kernel(rplan_program *p, rp_kernrec k)
{
    if (!grow((void **)&p->kerns, &p->capkerns, p->nkerns + 1, sizeof *p->kerns))
        return 0;
    p->kerns[p->nkerns++] = k;
    return 1;
}

const char *rp_prog_cstr(const rplan_program *p, uint32_t off)
{
    return off < p->nstrs ? p->strs + off : "";
}

/* ---- inspection ------------------------------------------------------------------ */

size_t rplan_nvalues(const rplan_program *p) { return p ? p->nvals : 0; }
size_t rplan_nbudgets(const rplan_program *p) { return p ? p->nbuds : 0; }
size_t rplan_npolicies(const rplan_program *p) { return p ? p->npols : 0; }
size_t rplan_ninstrs(const rplan_program *p) { return p ? p->ncode : 0; }

const char *rplan_source_name(const rplan_program *p)
{
    return p ? rp_prog_cstr(p, p->src_name) : "";
}

fhr_status rplan_value(const rplan_program *p, size_t i, rplan_value_info *o)
{
    if (!p || !o || i >= p->nvals)
        return FHR_E_INVALID;
    const rp_value *v = &p->vals[i];
    memset(o, 0, sizeof *o);
    o->name = rp_prog_cstr(p, v->name);
    o->nbytes = v->nbytes;
    o->mode = v->mode ? FHR_EXCLUSIVE : FHR_REPLICABLE;
    o->recoverability = v->recov ? FHR_RECONSTRUCTIBLE : FHR_MUST_PRESERVE;
    o->has_initial = v->init_slot != RP_NOLOC;
    if (o->has_initial)
        o->initial = fhr_loc_from_slot(v->init_slot);
    o->data = (rplan_data_kind)v->data;
    if (v->data == RPLAN_DATA_SYNTH)
        o->seed = v->arg;
    if (v->data == RPLAN_DATA_FILE)
        o->path = rp_prog_cstr(p, (uint32_t)v->arg);
    if (v->data == RPLAN_DATA_ENGINE) {
        o->loader = rp_prog_cstr(p, v->loader);
        o->loader_arg = v->arg;
    }
    o->nfields = v->nfields;
    if (v->cut) {
        o->limb_q = v->limb_q;
        o->limb_special = v->limb_special;
        o->limb_parts = v->limb_parts;
        o->limb_alpha = v->cut ? rp_value_alpha(v) : 0;
    }
    o->priority = v->prio;
    o->line = v->line;
    o->col = v->col;
    if (v->seeded) {
        o->seeded = 1;
        o->generator = rp_prog_cstr(p, v->gen);
        o->regen_seed = v->seed;
        o->regen_nbytes = rp_value_regen(p, v);
        o->keep = v->keep;
    }
    return FHR_OK;
}

fhr_status rplan_value_field(const rplan_program *p, size_t i, size_t k, const char **name,
                             uint64_t *nbytes)
{
    if (!p || i >= p->nvals || k >= p->vals[i].nfields)
        return FHR_E_INVALID;
    const rp_fieldrec *f = &p->fields[p->vals[i].field0 + k];
    if (name)
        *name = rp_prog_cstr(p, f->name);
    if (nbytes)
        *nbytes = f->nbytes;
    return FHR_OK;
}

/* Value i, when limbs is 0 or a count of q-limbs its cut has; NULL otherwise. */
static const rp_value *cut_value(const rplan_program *p, size_t i, uint32_t limbs)
{
    if (!p || i >= p->nvals)
        return NULL;
    const rp_value *v = &p->vals[i];
    return !limbs || (v->cut && limbs <= v->limb_q) ? v : NULL;
}

fhr_status rplan_value_cut(const rplan_program *p, size_t i, uint32_t limbs, uint64_t *nbytes)
{
    const rp_value *v = cut_value(p, i, limbs);
    if (!v || !nbytes)
        return FHR_E_INVALID;
    *nbytes = rp_value_cut_nbytes(p, v, limbs);
    return FHR_OK;
}

fhr_status rplan_value_cut_field(const rplan_program *p, size_t i, uint32_t limbs, size_t k,
                                 uint64_t *offset, uint64_t *nbytes)
{
    const rp_value *v = cut_value(p, i, limbs);
    if (!v || k >= rp_value_nfields(v))
        return FHR_E_INVALID;
    uint64_t off, n;
    rp_value_cut_field(p, v, limbs, (uint32_t)k, &off, &n);
    if (offset)
        *offset = off;
    if (nbytes)
        *nbytes = n;
    return FHR_OK;
}

int rplan_value_field_seeded(const rplan_program *p, size_t i, size_t k)
{
    if (!p || i >= p->nvals || k >= p->vals[i].nfields)
        return -1;
    return p->fields[p->vals[i].field0 + k].regen != 0;
}

size_t rplan_nkernels(const rplan_program *p) { return p ? p->nkerns : 0; }

fhr_status rplan_kernel_cost(const rplan_program *p, size_t i, rplan_kernel_info *o)
{
    if (!p || !o || i >= p->nkerns)
        return FHR_E_INVALID;
    o->name = rp_prog_cstr(p, p->kerns[i].name);
    o->kind = (rplan_cost_kind)p->kerns[i].kind;
    o->imm = p->kerns[i].imm;
    return FHR_OK;
}

fhr_status rplan_budget(const rplan_program *p, size_t i, fhr_budget *o)
{
    if (!p || !o || i >= p->nbuds)
        return FHR_E_INVALID;
    o->loc = fhr_loc_from_slot(p->buds[i].slot);
    o->nbytes = p->buds[i].nbytes;
    return FHR_OK;
}

fhr_status rplan_budget_position(const rplan_program *p, size_t i, uint32_t *line,
                                 uint32_t *col)
{
    if (!p || !line || !col || i >= p->nbuds)
        return FHR_E_INVALID;
    *line = p->buds[i].line;
    *col = p->buds[i].col;
    return FHR_OK;
}

fhr_status rplan_policy(const rplan_program *p, size_t i, rplan_policy_info *o)
{
    if (!p || !o || i >= p->npols)
        return FHR_E_INVALID;
    const rp_policyrec *r = &p->pols[i];
    memset(o, 0, sizeof *o);
    o->name = rp_prog_cstr(p, r->name);
    o->kind = (rplan_policy_kind)r->kind;
    o->nchains = r->n;
    for (uint32_t c = 0; c < r->n && c < 8; c++) {
        const rp_chainrec *ch = &p->chains[r->first + c];
        size_t k = 0;
        while (k < RP_MAX_CHAIN && ch->s[k] != RP_NOLOC) {
            o->chain[c][k] = fhr_loc_from_slot(ch->s[k]);
            k++;
        }
        o->chain_len[c] = k;
    }
    return FHR_OK;
}

fhr_status rplan_instr_get(const rplan_program *p, size_t i, rplan_instr *o)
{
    if (!p || !o || i >= p->ncode)
        return FHR_E_INVALID;
    const rp_ins *in = &p->code[i];
    const rp_opinfo *oi = &rp_ops[in->op];
    memset(o, 0, sizeof *o);
    o->op = in->op;
    o->opname = oi->name;
    o->line = p->lines[i].line;
    o->col = p->lines[i].col;
    uint32_t xy[2] = {in->x, in->y};
    uint8_t kxy[2] = {oi->x, oi->y};
    for (int k = 0; k < 2; k++) {
        switch (kxy[k]) {
        case RPLAN_OPD_VAL: o->value = xy[k]; break;
        case RPLAN_OPD_STR: o->str = rp_prog_cstr(p, xy[k]); break;
        case RPLAN_OPD_CONST: o->imm = p->cons[xy[k]]; break;
        case RPLAN_OPD_POL: o->policy = xy[k]; break;
        case RPLAN_OPD_COUNT: o->count = xy[k]; break;
        case RPLAN_OPD_LIMBS: o->limbs = xy[k]; break;
        default: break;
        }
    }
    if (oi->a == RPLAN_OPD_LOC) {
        o->has_loc = 1;
        o->loc = fhr_loc_from_slot(in->a);
    } else if (oi->a == RPLAN_OPD_PHASE) {
        o->phase = (fhr_phase)in->a;
    }
    if (oi->b == RPLAN_OPD_LOCOPT && in->b != RP_NOLOC) {
        o->has_from = 1;
        o->from = fhr_loc_from_slot(in->b);
    }
    return FHR_OK;
}
