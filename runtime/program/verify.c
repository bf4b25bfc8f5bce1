/* runtime/program/verify.c — the bytecode verifier, run on every compiled or loaded program:
 * tables and operand ranges, contexts and phase order, balanced stages, scopes, kernel
 * arguments and holds, then an abstract dry run of placements and budgets from the
 * declared initial state. Each refusal names the instruction (and so its source line). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "runtime/program/program.h"
#include "base/error.h"

typedef struct hold {
    uint32_t v;
    uint8_t slot;
    uint32_t depth;
    long instr;
} hold;

typedef struct V {
    const rplan_program *p;
    rp_vfail *f;
    uint64_t *where; /* per value: bit per location slot */
    uint64_t *onebuf; /* per value: its initial device copy, adopted whole in one buffer,
                         while it stays (it drops no parts) */
    long *gone;      /* per value: instruction that discarded it, -1 live */
    /* limb-cut values: cix[v] = k + 1 for the k-th of them (NULL when there are none);
     * cutl[k * FHR_LOC_SLOTS + slot]: the q-limbs its copy there holds, 0: whole; cutp: the
     * parts it kept after a drop of parts, 0: those its limbs read */
    uint32_t *cix, *cutl, *cutp;
    uint64_t used[FHR_LOC_SLOTS], reserved[FHR_LOC_SLOTS], budget[FHR_LOC_SLOTS];
    uint64_t hasb;
    const fhr_budget *ov; /* budgets in place of the program's (rp_verify_budgets) */
    size_t nov;
    uint64_t peak[FHR_LOC_SLOTS]; /* the highest charge set against each budget */
    hold *holds;
    size_t nholds, capholds;
    /* the open plan or request */
    int scope; /* 0 none, RPLAN_OP_PLAN or RPLAN_OP_REQUEST */
    long scope_at;
    fhr_phase phase;
    uint64_t scope_res[FHR_LOC_SLOTS];
    uint32_t *req_v; /* request requirements */
    uint8_t *req_s;
    uint32_t *req_l; /* the q-limbs each needs, 0: the whole value */
    long *req_at;
    size_t nreq, capreq;
    uint32_t depth; /* stage nesting */
    uint32_t args;  /* kernel arguments still expected */
    long pc;
    /* the open plan's enter-phase ensures and moves to devices, in order */
    uint32_t *ent_v;
    uint8_t *ent_s;
    size_t nent, capent;
    /* the body call being read: its RUN and its arguments so far */
    long run_at;
    uint32_t run_n;
    uint8_t run_op[RP_MAX_ARGS];
    uint32_t run_x[RP_MAX_ARGS];
} V;

static fhr_status fail(V *s, fhr_status st, long instr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fhr_status fail(V *s, fhr_status st, long instr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->f->msg, sizeof s->f->msg, fmt, ap);
    va_end(ap);
    s->f->instr = instr;
    return st;
}

static void note(V *s, long instr, long value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void note(V *s, long instr, long value, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->f->note, sizeof s->f->note, fmt, ap);
    va_end(ap);
    s->f->note_instr = instr;
    s->f->note_value = value;
}

static int str_ok(const rplan_program *p, uint64_t off)
{
    return off < p->nstrs && (off == 0 || p->strs[off - 1] == '\0');
}

static const char *S_(const rplan_program *p, uint32_t off) { return p->strs + off; }

static const char *loc_name(uint8_t slot, char *buf)
{
    return fhr_loc_format(fhr_loc_from_slot(slot), buf, 24);
}

static const char *size_text(uint64_t n, char *buf)
{
    return fhr_size_format(n, FHR_SIZE_EXACT, buf, 32);
}

/* ---- tables ------------------------------------------------------------------------- */

static size_t name_hash(const char *n)
{
    uint64_t h = 1469598103934665603ull;
    for (; *n; n++)
        h = (h ^ (unsigned char)*n) * 1099511628211ull;
    return (size_t)h;
}

/* The kernel cost records: a name and a kind each, no name twice (a hashed set of the
 * names seen, so a long table is checked in linear time). */
static fhr_status check_kernel_costs(V *s)
{
    const rplan_program *p = s->p;
    size_t cap = 16;
    while (cap < 2 * (size_t)p->nkerns)
        cap *= 2;
    uint32_t *seen = p->nkerns ? calloc(cap, sizeof *seen) : NULL; /* kernel index + 1 */
    if (p->nkerns && !seen)
        return fail(s, FHR_E_NOMEM, -1, "out of host memory (kernel costs)");
    fhr_status st = FHR_OK;
    for (uint32_t i = 0; i < p->nkerns && !st; i++) {
        const rp_kernrec *k = &p->kerns[i];
        if (!str_ok(p, k->name) || !p->strs[k->name] ||
            (k->kind != RPLAN_COST_DURATION && k->kind != RPLAN_COST_READS)) {
            st = fail(s, FHR_E_INVALID, -1, "kernel cost %u: bad name or kind", i);
            break;
        }
        size_t h = name_hash(p->strs + k->name) & (cap - 1);
        while (seen[h] && strcmp(p->strs + p->kerns[seen[h] - 1].name, p->strs + k->name))
            h = (h + 1) & (cap - 1);
        if (seen[h])
            st = fail(s, FHR_E_INVALID, -1, "kernel cost %u: '%s' repeated", i, p->strs + k->name);
        seen[h] = i + 1;
    }
    free(seen);
    return st;
}

static fhr_status check_tables(V *s)
{
    const rplan_program *p = s->p;
    if (p->nstrs == 0 || p->strs[0] != '\0' || p->strs[p->nstrs - 1] != '\0')
        return fail(s, FHR_E_INVALID, -1, "string table is not NUL-terminated");
    if (!str_ok(p, p->src_name))
        return fail(s, FHR_E_INVALID, -1, "source name is not a valid string");
    for (uint32_t off = 1; off < p->nstrs;) {
        size_t n = strlen(p->strs + off), bad = rp_text_bad(p->strs + off, n);
        if (bad < n)
            return fail(s, FHR_E_INVALID, -1, "string at offset %u: byte 0x%02x at %zu is not "
                        "UTF-8 text (control bytes and ill-formed sequences are refused)", off,
                        (unsigned char)p->strs[off + bad], bad);
        off += (uint32_t)n + 1;
    }
    for (uint32_t i = 0; i < p->nvals; i++) {
        const rp_value *v = &p->vals[i];
        if (!str_ok(p, v->name) || !p->strs[v->name])
            return fail(s, FHR_E_INVALID, -1, "value %u: bad name", i);
        if (v->mode > 1 || v->recov > 1 || v->data > RPLAN_DATA_ENGINE)
            return fail(s, FHR_E_INVALID, -1, "value %u: bad mode, recoverability or data kind",
                        i);
        if (v->nbytes == 0)
            return fail(s, FHR_E_INVALID, -1, "value %u: size is zero", i);
        if (v->recov ? (v->init_slot != RP_NOLOC || v->data == RPLAN_DATA_ZERO)
                     : v->init_slot >= FHR_LOC_SLOTS)
            return fail(s, FHR_E_INVALID, -1, "value %u: bad initial placement or source", i);
        if (v->data == RPLAN_DATA_FILE && (!str_ok(p, v->arg) || !p->strs[v->arg]))
            return fail(s, FHR_E_INVALID, -1, "value %u: bad file path", i);
        if (v->data == RPLAN_DATA_ZERO && v->arg != 0)
            return fail(s, FHR_E_INVALID, -1, "value %u: stray data argument", i);
        if (v->data == RPLAN_DATA_ENGINE && (!str_ok(p, v->loader) || !p->strs[v->loader]))
            return fail(s, FHR_E_INVALID, -1, "value %u: bad loader name", i);
        if (v->nfields) { /* named fields: distinct, none empty, adding up to the value */
            uint64_t sum = 0;
            for (uint32_t k = 0; k < v->nfields; k++) {
                const rp_fieldrec *f = &p->fields[v->field0 + k];
                if (!str_ok(p, f->name) || !p->strs[f->name] || f->nbytes == 0 ||
                    f->nbytes > v->nbytes - sum)
                    return fail(s, FHR_E_INVALID, -1, "value %u: field %u: bad name or size",
                                i, k);
                sum += f->nbytes;
                for (uint32_t j = 0; j < k; j++)
                    if (p->fields[v->field0 + j].name == f->name ||
                        !strcmp(p->strs + p->fields[v->field0 + j].name, p->strs + f->name))
                        return fail(s, FHR_E_INVALID, -1, "value %u: field '%s' repeated", i,
                                    p->strs + f->name);
            }
            if (sum != v->nbytes)
                return fail(s, FHR_E_INVALID, -1, "value %u: its fields hold %llu of its %llu "
                            "bytes", i, (unsigned long long)sum, (unsigned long long)v->nbytes);
        }
        char sm[160];
        if (!rp_check_seeded(p, i, sm, sizeof sm) || !rp_check_cut(p, i, sm, sizeof sm))
            return fail(s, FHR_E_INVALID, -1, "%s", sm);
    }
    fhr_status kst = check_kernel_costs(s);
    if (kst)
        return kst;
    for (uint32_t i = 0; i < p->nbuds; i++) {
        if (p->buds[i].slot >= FHR_LOC_SLOTS || (i && p->buds[i].slot <= p->buds[i - 1].slot))
            return fail(s, FHR_E_INVALID, -1, "budget %u: bad or repeated location", i);
    }
    uint32_t next = 0;
    for (uint32_t i = 0; i < p->npols; i++) {
        const rp_policyrec *r = &p->pols[i];
        if (!str_ok(p, r->name) || !p->strs[r->name] || (r->kind != RPLAN_POLICY_TIERED_LRU && r->kind != RPLAN_POLICY_LOOKAHEAD))
            return fail(s, FHR_E_INVALID, -1, "policy %u: bad name or kind", i);
        if (r->first != next || r->n == 0 || r->n > 8 || r->n > p->nchains - r->first)
            return fail(s, FHR_E_INVALID, -1, "policy %u: bad chain range", i);
        next += r->n;
        for (uint32_t c = r->first; c < r->first + r->n; c++) {
            const uint8_t *ch = p->chains[c].s;
            int k = 0;
            while (k < RP_MAX_CHAIN && ch[k] != RP_NOLOC) {
                if (ch[k] >= FHR_LOC_SLOTS)
                    return fail(s, FHR_E_INVALID, -1, "policy %u: bad location", i);
                for (int j = 0; j < k; j++)
                    if (ch[j] == ch[k])
                        return fail(s, FHR_E_INVALID, -1, "policy %u: repeated location", i);
                k++;
            }
            if (k < 2)
                return fail(s, FHR_E_INVALID, -1, "policy %u: chain shorter than two", i);
            for (int j = k; j < RP_MAX_CHAIN; j++)
                if (ch[j] != RP_NOLOC)
                    return fail(s, FHR_E_INVALID, -1, "policy %u: bad chain padding", i);
            for (uint32_t c2 = r->first; c2 < c; c2++)
                if (p->chains[c2].s[0] == ch[0])
                    return fail(s, FHR_E_INVALID, -1, "policy %u: two chains start at one "
                                                      "location", i);
        }
    }
    if (next != p->nchains)
        return fail(s, FHR_E_INVALID, -1, "fallback chains not owned by any policy");
    return FHR_OK;
}

/* Every source position (line table, value declarations) inside the embedded source text,
 * when there is one: line 1.., column 1..its length + 1; 0:0 means unknown. */
static fhr_status check_positions(V *s)
{
    const rplan_program *p = s->p;
    if (!p->src)
        return FHR_OK;
    /* line starts, lines ending at \n, \r\n or a lone \r as the lexer counts them */
    size_t n = 1;
    for (uint32_t i = 0; i < p->srclen; i++)
        n += p->src[i] == '\n' || (p->src[i] == '\r' && (i + 1 == p->srclen || p->src[i + 1] != '\n'));
    uint32_t *len = calloc(n, sizeof *len);
    if (!len)
        return FHR_E_NOMEM;
    size_t k = 0;
    for (uint32_t i = 0; i < p->srclen; i++) {
        if (p->src[i] == '\n' || p->src[i] == '\r') {
            if (p->src[i] == '\r' && i + 1 < p->srclen && p->src[i + 1] == '\n')
                i++;
            k++;
        } else {
            len[k]++;
        }
    }
    fhr_status st = FHR_OK;
    for (uint32_t i = 0; i < p->ncode && !st; i++) {
        const rp_linerec *l = &p->lines[i];
        if (l->line && (l->line > n || l->col == 0 || l->col > len[l->line - 1] + 1))
            st = fail(s, FHR_E_INVALID, -1, "instruction %u: source position %u:%u is outside "
                      "the embedded source (%zu lines)", i, l->line, l->col, n);
    }
    for (uint32_t i = 0; i < p->nvals && !st; i++) {
        const rp_value *v = &p->vals[i];
        if (v->line && (v->line > n || v->col == 0 || v->col > len[v->line - 1] + 1))
            st = fail(s, FHR_E_INVALID, -1, "value %u: source position %u:%u is outside the "
                      "embedded source (%zu lines)", i, v->line, v->col, n);
    }
    for (uint32_t i = 0; i < p->nbuds && !st; i++) {
        const rp_budgetrec *b = &p->buds[i];
        if (b->line && (b->line > n || b->col == 0 || b->col > len[b->line - 1] + 1))
            st = fail(s, FHR_E_INVALID, -1, "budget %u: source position %u:%u is outside the "
                      "embedded source (%zu lines)", i, b->line, b->col, n);
    }
    free(len);
    return st;
}

static fhr_status check_operand(V *s, long pc, uint8_t kind, uint64_t v, const char *which)
{
    const rplan_program *p = s->p;
    const char *op = rp_ops[p->code[pc].op].name;
    int ok = 1;
    switch (kind) {
    case RPLAN_OPD_NONE: ok = v == 0; break;
    case RPLAN_OPD_VAL: ok = v < p->nvals; break;
    case RPLAN_OPD_LOC: ok = v < FHR_LOC_SLOTS; break;
    case RPLAN_OPD_LOCOPT: ok = v < FHR_LOC_SLOTS || v == RP_NOLOC; break;
    case RPLAN_OPD_STR: ok = str_ok(p, v); break;
    case RPLAN_OPD_CONST: ok = v < p->ncons; break;
    case RPLAN_OPD_POL: ok = v < p->npols; break;
    case RPLAN_OPD_PHASE:
        ok = v == FHR_PHASE_RECLAIM || v == FHR_PHASE_ENTER || v == FHR_PHASE_BODY ||
             v == FHR_PHASE_EXIT;
        break;
    case RPLAN_OPD_COUNT: ok = v <= 64; break;
    case RPLAN_OPD_LIMBS: ok = v <= RP_MAX_LIMBS; break;
    default: ok = 0; break;
    }
    if (!ok)
        return fail(s, FHR_E_INVALID, pc, "instruction %ld (%s): operand %s out of range", pc,
                    op, which);
    return FHR_OK;
}

/* A limb count (require, ensure): 1.5 on, on a value with a limb cut of at least that many
 * q-limbs, at a device (host and pinned copies are whole). */
static fhr_status check_limbs(V *s, long pc, const rp_ins *in)
{
    const rp_opinfo *oi = &rp_ops[in->op];
    if (oi->y != RPLAN_OPD_LIMBS || in->y == 0)
        return FHR_OK;
    const rp_value *v = &s->p->vals[in->x];
    const char *nm = S_(s->p, v->name);
    char l[24];
    if (s->p->minor < 5)
        return fail(s, FHR_E_INVALID, pc, "instruction %ld (%s): a limb count in a version 1.%u "
                    "file (limb counts are 1.5 on)", pc, oi->name, s->p->minor);
    if (in->op == RPLAN_OP_DROP && s->p->minor < 6)
        return fail(s, FHR_E_INVALID, pc, "instruction %ld (drop): a limb count in a version "
                    "1.%u file (a drop of parts is 1.6 on)", pc, s->p->minor);
    if (!v->cut)
        return fail(s, FHR_E_INVALID, pc, "instruction %ld (%s): a limb count on '%s', which "
                    "has no limb cut", pc, oi->name, nm);
    if (in->y > v->limb_q)
        return fail(s, FHR_E_INVALID, pc, "instruction %ld (%s): %u limbs of '%s', which has %u "
                    "q-limbs", pc, oi->name, in->y, nm, v->limb_q);
    if (fhr_loc_from_slot(in->a).kind != FHR_LOC_CUDA)
        return fail(s, FHR_E_INVALID, pc, "instruction %ld (%s): a limb count at %s; host and "
                    "pinned copies are whole", pc, oi->name, loc_name(in->a, l));
    return FHR_OK;
}

/* ---- dry run helpers --------------------------------------------------------------- */

/* The q-limbs counter of v's copy at slot (0: whole), or NULL when v has no limb cut. */
static uint32_t *cut_of(V *s, uint32_t v, uint8_t slot)
{
    return s->cix && s->cix[v] ? &s->cutl[(size_t)(s->cix[v] - 1) * FHR_LOC_SLOTS + slot] : NULL;
}

/* The parts counter beside cut_of's (0: the parts its limbs read). */
static uint32_t *parts_of(V *s, uint32_t v, uint8_t slot)
{
    return &s->cutp[(size_t)(s->cix[v] - 1) * FHR_LOC_SLOTS + slot];
}

/* The parts a use of `limbs` q-limbs (0: whole) reads of cut value x. */
static uint32_t parts_read(const rp_value *x, uint32_t limbs)
{
    return limbs && limbs < x->limb_q ? (limbs + rp_value_alpha(x) - 1) / rp_value_alpha(x)
                                      : x->limb_parts;
}

/* What v's copy at slot is charged: the limbs (and parts) it holds. */
static uint64_t copy_charge(V *s, uint32_t v, uint8_t slot)
{
    const uint32_t *c = cut_of(s, v, slot);
    const rp_value *x = &s->p->vals[v];
    return c && *c ? rp_value_cut_parts_nbytes(s->p, x, *c, *parts_of(s, v, slot))
                   : rp_value_charge(s->p, x, slot);
}

/* The locations of v's whole copies. */
static uint64_t whole_copies(V *s, uint32_t v)
{
    uint64_t w = s->where[v];
    for (uint8_t k = 0; s->cix && s->cix[v] && k < FHR_LOC_SLOTS; k++)
        if (*cut_of(s, v, k))
            w &= ~(1ull << k);
    return w;
}

/* A charge of `total` bytes at slot, set against its budget: the peak the dry run saw. */
static void seen(V *s, uint8_t slot, uint64_t total)
{
    if (total > s->peak[slot])
        s->peak[slot] = total;
}

static fhr_status charge(V *s, uint8_t slot, uint64_t n, const char *what)
{
    uint64_t sum = s->used[slot] + s->reserved[slot];
    seen(s, slot, sum + n < sum ? UINT64_MAX : sum + n);
    if (s->hasb >> slot & 1) {
        uint64_t have = s->used[slot] + s->reserved[slot];
        uint64_t b = s->budget[slot];
        uint64_t avail = have >= b ? 0 : b - have;
        if (n > avail) {
            char l[24], x[32], y[32], z[32], w[32];
            return fail(s, FHR_E_INFEASIBLE, s->pc,
                        "%s exceeds the budget of %s: needs %s, %s of %s available (%s short)",
                        what, loc_name(slot, l), size_text(n, x), size_text(avail, y),
                        size_text(b, w), size_text(n - avail, z));
        }
    }
    uint64_t t;
    if (__builtin_add_overflow(s->used[slot], n, &t) ||
        __builtin_add_overflow(t, s->reserved[slot], &t)) {
        char l[24];
        return fail(s, FHR_E_INFEASIBLE, s->pc, "%s: the bytes at %s overflow 64 bits", what,
                    loc_name(slot, l));
    }
    s->used[slot] += n;
    return FHR_OK;
}

static fhr_status live(V *s, uint32_t v, const char *verb)
{
    if (s->gone[v] >= 0) {
        fail(s, FHR_E_INFEASIBLE, s->pc, "%s of '%s' after it was discarded", verb,
             S_(s->p, s->p->vals[v].name));
        note(s, s->gone[v], -1, "'%s' is discarded here", S_(s->p, s->p->vals[v].name));
        return FHR_E_INFEASIBLE;
    }
    return FHR_OK;
}

static long held_at(V *s, uint32_t v, uint8_t slot)
{
    for (size_t i = s->nholds; i-- > 0;)
        if (s->holds[i].v == v && s->holds[i].slot == slot)
            return (long)i;
    return -1;
}

static fhr_status not_held(V *s, uint32_t v, uint8_t slot, const char *verb)
{
    long h = held_at(s, v, slot);
    if (h >= 0) {
        char l[24];
        fail(s, FHR_E_INFEASIBLE, s->pc, "cannot %s '%s' at %s: the copy is held", verb,
             S_(s->p, s->p->vals[v].name), loc_name(slot, l));
        note(s, s->holds[h].instr, -1, "held here");
        return FHR_E_INFEASIBLE;
    }
    return FHR_OK;
}

static void uncharge(V *s, uint32_t v, uint8_t slot)
{
    uint32_t *c = cut_of(s, v, slot);
    s->where[v] &= ~(1ull << slot);
    s->onebuf[v] &= ~(1ull << slot);
    s->used[slot] -= copy_charge(s, v, slot);
    if (c)
        *c = *parts_of(s, v, slot) = 0;
}

/* ---- the dry-run rules named in opcodes.def ------------------------------------------ */

#define RULE(name) static fhr_status vr_##name(V *s, const rp_ins *in)
#define NAMEV(v) S_(s->p, s->p->vals[v].name)

RULE(stage)
{
    (void)in;
    if (s->depth == RP_MAX_STAGE_DEPTH)
        return fail(s, FHR_E_INVALID, s->pc, "stages are nested too deeply (at most %d levels)",
                    RP_MAX_STAGE_DEPTH);
    s->depth++;
    return FHR_OK;
}

RULE(endstage)
{
    (void)in;
    if (s->depth == 0)
        return fail(s, FHR_E_INVALID, s->pc, "'endstage' without an open stage");
    for (size_t i = 0; i < s->nholds; i++)
        if (s->holds[i].depth == s->depth) {
            char l[24];
            fail(s, FHR_E_INFEASIBLE, s->holds[i].instr,
                 "hold of '%s' at %s is never released in its stage",
                 NAMEV(s->holds[i].v), loc_name(s->holds[i].slot, l));
            note(s, s->pc, -1, "the stage ends here");
            return FHR_E_INFEASIBLE;
        }
    s->depth--;
    return FHR_OK;
}

static fhr_status open_scope(V *s, int kind)
{
    s->scope = kind;
    s->scope_at = s->pc;
    s->phase = FHR_PHASE_NONE;
    memset(s->scope_res, 0, sizeof s->scope_res);
    s->nreq = 0;
    s->nent = 0;
    return FHR_OK;
}

RULE(plan)
{
    (void)in;
    return open_scope(s, RPLAN_OP_PLAN);
}

RULE(request)
{
    (void)in;
    return open_scope(s, RPLAN_OP_REQUEST);
}

RULE(phase)
{
    fhr_phase ph = (fhr_phase)in->a;
    if (s->scope == RPLAN_OP_REQUEST && ph != FHR_PHASE_BODY)
        return fail(s, FHR_E_INVALID, s->pc, "phase %s inside a request", fhr_phase_name(ph));
    if (ph <= s->phase)
        return fail(s, FHR_E_INVALID, s->pc, "phase %s after phase %s", fhr_phase_name(ph),
                    fhr_phase_name(s->phase));
    s->phase = ph;
    return FHR_OK;
}

RULE(reserve)
{
    if (s->phase > FHR_PHASE_RESERVE)
        return fail(s, FHR_E_INVALID, s->pc, "reservation after phase %s",
                    fhr_phase_name(s->phase));
    s->phase = FHR_PHASE_RESERVE;
    uint64_t n = s->p->cons[in->x];
    if (n == 0)
        return fail(s, FHR_E_INVALID, s->pc, "reservation of zero bytes");
    if (s->scope == RPLAN_OP_REQUEST) {
        if (__builtin_add_overflow(s->scope_res[in->a], n, &s->scope_res[in->a]))
            return fail(s, FHR_E_INFEASIBLE, s->pc, "reservations overflow");
        return FHR_OK;
    }
    char l[24];
    uint64_t sum = s->used[in->a] + s->reserved[in->a];
    seen(s, in->a, sum + n < sum ? UINT64_MAX : sum + n);
    if (s->hasb >> in->a & 1) {
        uint64_t have = s->used[in->a] + s->reserved[in->a];
        uint64_t b = s->budget[in->a], avail = have >= b ? 0 : b - have;
        if (n > avail) {
            char x[32], y[32], z[32], w[32];
            return fail(s, FHR_E_INFEASIBLE, s->pc,
                        "reservation exceeds the budget of %s: needs %s, %s of %s available "
                        "(%s short)",
                        loc_name(in->a, l), size_text(n, x), size_text(avail, y),
                        size_text(b, w), size_text(n - avail, z));
        }
    } else if (s->reserved[in->a] + n < n) {
        return fail(s, FHR_E_INFEASIBLE, s->pc, "reservations at %s overflow",
                    loc_name(in->a, l));
    }
    s->reserved[in->a] += n;
    s->scope_res[in->a] += n;
    return FHR_OK;
}

RULE(require)
{
    if (s->phase != FHR_PHASE_NONE)
        return fail(s, FHR_E_INVALID, s->pc, "requirement after phase %s",
                    fhr_phase_name(s->phase));
    fhr_status st = live(s, in->x, "requirement");
    if (st)
        return st;
    const rp_value *v = &s->p->vals[in->x];
    for (size_t i = 0; i < s->nreq; i++) {
        if (s->req_v[i] != in->x)
            continue;
        if (s->req_s[i] == in->a) { /* the same endpoint twice: one requirement, the larger */
            if (s->req_l[i] && (!in->y || in->y > s->req_l[i]))
                s->req_l[i] = in->y;
            return FHR_OK;
        }
        if (v->mode) {
            char a[24], b[24];
            fail(s, FHR_E_INFEASIBLE, s->pc,
                 "EXCLUSIVE value '%s' is required at two locations (%s and %s)", NAMEV(in->x),
                 loc_name(s->req_s[i], a), loc_name(in->a, b));
            note(s, s->req_at[i], -1, "first required here");
            return FHR_E_INFEASIBLE;
        }
    }
    /* four arrays of one length: each grows with its own copy of the capacity */
    size_t c1 = s->capreq, c2 = s->capreq, c3 = s->capreq, c4 = s->capreq;
    if (!fhr_grow((void **)&s->req_v, &c1, s->nreq, sizeof *s->req_v, 16) ||
        !fhr_grow((void **)&s->req_s, &c2, s->nreq, sizeof *s->req_s, 16) ||
        !fhr_grow((void **)&s->req_at, &c3, s->nreq, sizeof *s->req_at, 16) ||
        !fhr_grow((void **)&s->req_l, &c4, s->nreq, sizeof *s->req_l, 16))
        return FHR_E_NOMEM;
    s->capreq = c1;
    s->req_v[s->nreq] = in->x;
    s->req_s[s->nreq] = in->a;
    s->req_at[s->nreq] = s->pc;
    s->req_l[s->nreq] = in->y;
    s->nreq++;
    return FHR_OK;
}

/* What requirement i needs: the whole value, or the limbs of its level. */
static uint64_t req_charge(V *s, size_t i)
{
    const rp_value *v = &s->p->vals[s->req_v[i]];
    return s->req_l[i] ? rp_value_cut_nbytes(s->p, v, s->req_l[i])
                       : rp_value_charge(s->p, v, s->req_s[i]);
}

/* A request is decided at run time; the verifier checks that its requirements,
 * reservations and the held copies that no policy may evict fit each budget. */
static fhr_status check_request(V *s)
{
    const rplan_program *p = s->p;
    uint64_t need[FHR_LOC_SLOTS];
    memcpy(need, s->scope_res, sizeof need);
    for (size_t i = 0; i < s->nreq; i++)
        if (__builtin_add_overflow(need[s->req_s[i]], req_charge(s, i), &need[s->req_s[i]]))
            return fail(s, FHR_E_INFEASIBLE, s->scope_at, "request size overflows");
    for (size_t h = 0; h < s->nholds; h++) {
        const hold *hd = &s->holds[h];
        uint64_t held = copy_charge(s, hd->v, hd->slot), counted = 0;
        int dup = 0;
        /* a held copy that is also required needs the larger of the two */
        for (size_t i = 0; i < s->nreq; i++)
            if (s->req_v[i] == hd->v && s->req_s[i] == hd->slot)
                counted = req_charge(s, i);
        /* count each held copy once */
        for (size_t g = 0; g < h; g++)
            dup |= s->holds[g].v == hd->v && s->holds[g].slot == hd->slot;
        if (!dup && held > counted)
            need[hd->slot] += held - counted;
    }
    for (int slot = 0; slot < FHR_LOC_SLOTS; slot++) {
        uint64_t sum = need[slot] + s->reserved[slot];
        seen(s, (uint8_t)slot, sum < need[slot] ? UINT64_MAX : sum);
        if (!(s->hasb >> slot & 1))
            continue;
        uint64_t b = s->budget[slot] > s->reserved[slot] ? s->budget[slot] - s->reserved[slot]
                                                         : 0;
        if (need[slot] > b) {
            char l[24], x[32], y[32], z[32];
            return fail(s, FHR_E_INFEASIBLE, s->scope_at,
                        "request '%s' cannot fit %s: needs %s, the budget allows %s (%s short)",
                        S_(p, p->code[s->scope_at].x), loc_name((uint8_t)slot, l),
                        size_text(need[slot], x), size_text(b, y), size_text(need[slot] - b, z));
        }
    }
    return FHR_OK;
}

RULE(end)
{
    (void)in;
    fhr_status st = FHR_OK;
    if (s->scope == RPLAN_OP_REQUEST)
        st = check_request(s);
    else
        for (int slot = 0; slot < FHR_LOC_SLOTS; slot++)
            s->reserved[slot] -= s->scope_res[slot];
    s->scope = 0;
    return st;
}

/* An ensure or move to a device in a plan's enter phase places the bodies that read the
 * value (rule of body_at). */
static fhr_status note_enter(V *s, const rp_ins *in)
{
    if (s->scope != RPLAN_OP_PLAN || s->phase != FHR_PHASE_ENTER ||
        fhr_loc_from_slot(in->a).kind != FHR_LOC_CUDA)
        return FHR_OK;
    size_t c1 = s->capent, c2 = s->capent;
    if (!fhr_grow((void **)&s->ent_v, &c1, s->nent, sizeof *s->ent_v, 16) ||
        !fhr_grow((void **)&s->ent_s, &c2, s->nent, sizeof *s->ent_s, 16))
        return FHR_E_NOMEM;
    s->capent = c1;
    s->ent_v[s->nent] = in->x;
    s->ent_s[s->nent++] = in->a;
    return FHR_OK;
}

RULE(ensure)
{
    fhr_status st = live(s, in->x, "ensure");
    if (st || (st = note_enter(s, in)))
        return st;
    const rp_value *v = &s->p->vals[in->x];
    char l[24], what[200];
    if (v->mode) {
        fail(s, FHR_E_INFEASIBLE, s->pc, "ensure of EXCLUSIVE value '%s'; use move",
             NAMEV(in->x));
        note(s, -1, (long)in->x, "'%s' is declared exclusive here", NAMEV(in->x));
        return FHR_E_INFEASIBLE;
    }
    uint32_t *c = cut_of(s, in->x, in->a);
    snprintf(what, sizeof what, "ensure of '%s' at %s", NAMEV(in->x), loc_name(in->a, l));
    if (s->where[in->x] >> in->a & 1) {
        uint32_t *pk = c ? parts_of(s, in->x, in->a) : NULL;
        if (!c || !*c || (in->y && *c >= in->y && (!*pk || *pk >= parts_read(v, in->y))))
            return FHR_OK; /* already there: ensure keeps existing copies, nothing to do */
        /* a copy of fewer limbs or parts grows to those asked for (in->y 0: the whole value) */
        uint64_t have = copy_charge(s, in->x, in->a), want = rp_value_cut_nbytes(s->p, v, in->y);
        if (want > have && (st = charge(s, in->a, want - have, what)))
            return st;
        if (want < have)
            s->used[in->a] -= have - want;
        *c = in->y;
        *pk = 0;
        return FHR_OK;
    }
    /* (a value that must be preserved always keeps a whole copy: see drop and move) */
    if (!s->where[in->x] && !v->recov)
        return fail(s, FHR_E_INFEASIBLE, s->pc, "'%s' has no copy to ensure from",
                    NAMEV(in->x));
    uint64_t n = in->y ? rp_value_cut_nbytes(s->p, v, in->y) : rp_value_charge(s->p, v, in->a);
    if ((st = charge(s, in->a, n, what)))
        return st;
    s->where[in->x] |= 1ull << in->a;
    if (c)
        *c = in->y, *parts_of(s, in->x, in->a) = 0;
    return FHR_OK;
}

RULE(move)
{
    fhr_status st = live(s, in->x, "move");
    if (st || (st = note_enter(s, in)))
        return st;
    const rp_value *v = &s->p->vals[in->x];
    uint64_t w = s->where[in->x];
    char l[24], f[24], what[200];
    uint8_t from = in->b;
    if (from == in->a)
        return fail(s, FHR_E_INVALID, s->pc, "move from and to the same location");
    if (w >> in->a & 1)
        return fail(s, FHR_E_INFEASIBLE, s->pc, "move of '%s': it already has a copy at %s",
                    NAMEV(in->x), loc_name(in->a, l));
    if (from != RP_NOLOC) {
        if (!(w >> from & 1))
            return fail(s, FHR_E_INFEASIBLE, s->pc, "move of '%s': no copy at %s to move from",
                        NAMEV(in->x), loc_name(from, f));
    } else {
        /* the manager's choice: pinned, then host, then devices in order */
        static const uint8_t order_head[] = {1, 0};
        for (int i = 0; i < 2 && from == RP_NOLOC; i++)
            if (w >> order_head[i] & 1)
                from = order_head[i];
        for (uint8_t k = 2; k < FHR_LOC_SLOTS && from == RP_NOLOC; k++)
            if (w >> k & 1)
                from = k;
        if (from == RP_NOLOC)
            return fail(s, FHR_E_INFEASIBLE, s->pc, "move of '%s': it has no copy to move",
                        NAMEV(in->x));
    }
    if (!(whole_copies(s, in->x) >> from & 1))
        return fail(s, FHR_E_INFEASIBLE, s->pc, "move of '%s': its copy at %s holds only a "
                    "level's limbs; a move takes a whole copy", NAMEV(in->x), loc_name(from, f));
    if ((st = not_held(s, in->x, from, "move")))
        return st;
    snprintf(what, sizeof what, "move of '%s' to %s", NAMEV(in->x), loc_name(in->a, l));
    if ((st = charge(s, in->a, rp_value_charge(s->p, v, in->a), what)))
        return st;
    s->where[in->x] |= 1ull << in->a;
    uncharge(s, in->x, from);
    return FHR_OK;
}

/* drop with a limb count (a drop of parts): the copy keeps the parts a use of in->y
 * q-limbs reads, each with the q-limbs it held; a whole copy then holds every q-limb of
 * fewer parts. The last whole copy of a value that must be preserved keeps its parts. */
static fhr_status drop_parts(V *s, const rp_ins *in, const rp_value *v)
{
    uint32_t *c = cut_of(s, in->x, in->a), *pk = parts_of(s, in->x, in->a);
    uint32_t held = *pk ? *pk : parts_read(v, *c), keep = parts_read(v, in->y);
    if (keep >= held)
        return FHR_OK; /* nothing to drop */
    if (s->onebuf[in->x] >> in->a & 1) {
        char l[24];
        fail(s, FHR_E_INFEASIBLE, s->pc, "drop of parts of '%s' at %s: the copy there is its "
             "initial one, adopted whole in one buffer; it drops no parts", NAMEV(in->x),
             loc_name(in->a, l));
        note(s, -1, (long)in->x, "'%s' is placed at %s here", NAMEV(in->x), l);
        return FHR_E_INFEASIBLE;
    }
    if (!*c && !v->recov && whole_copies(s, in->x) == (1ull << in->a)) {
        fail(s, FHR_E_INFEASIBLE, s->pc, "drop of parts of the last whole copy of '%s', which "
             "must be preserved; keep a whole copy elsewhere first", NAMEV(in->x));
        note(s, -1, (long)in->x, "'%s' is adopted (MUST_PRESERVE) here", NAMEV(in->x));
        return FHR_E_INFEASIBLE;
    }
    uint64_t before = copy_charge(s, in->x, in->a);
    if (!*c)
        *c = v->limb_q;
    *pk = keep;
    s->used[in->a] -= before - copy_charge(s, in->x, in->a);
    return FHR_OK;
}

RULE(drop)
{
    fhr_status st = live(s, in->x, "drop");
    if (st)
        return st;
    const rp_value *v = &s->p->vals[in->x];
    char l[24];
    if (!(s->where[in->x] >> in->a & 1))
        return fail(s, FHR_E_INFEASIBLE, s->pc, "drop of '%s': no copy at %s", NAMEV(in->x),
                    loc_name(in->a, l));
    if ((st = not_held(s, in->x, in->a, "drop")))
        return st;
    if (in->y)
        return drop_parts(s, in, v);
    if (!v->recov && s->where[in->x] == (1ull << in->a)) {
        fail(s, FHR_E_INFEASIBLE, s->pc,
             "drop of the last copy of '%s', which must be preserved; move it or discard it",
             NAMEV(in->x));
        note(s, -1, (long)in->x, "'%s' is adopted (MUST_PRESERVE) here", NAMEV(in->x));
        return FHR_E_INFEASIBLE;
    }
    if (!v->recov && !(whole_copies(s, in->x) & ~(1ull << in->a))) {
        fail(s, FHR_E_INFEASIBLE, s->pc,
             "drop of the last whole copy of '%s', which must be preserved (its other copies "
             "hold a level's limbs); move it or discard it", NAMEV(in->x));
        note(s, -1, (long)in->x, "'%s' is adopted (MUST_PRESERVE) here", NAMEV(in->x));
        return FHR_E_INFEASIBLE;
    }
    uncharge(s, in->x, in->a);
    return FHR_OK;
}

RULE(discard)
{
    fhr_status st = live(s, in->x, "discard");
    if (st)
        return st;
    for (uint8_t k = 0; k < FHR_LOC_SLOTS; k++)
        if (s->where[in->x] >> k & 1) {
            if ((st = not_held(s, in->x, k, "discard")))
                return st;
            uncharge(s, in->x, k);
        }
    s->gone[in->x] = s->pc;
    return FHR_OK;
}

RULE(hold)
{
    fhr_status st = live(s, in->x, "hold");
    if (st)
        return st;
    char l[24];
    if (!(s->where[in->x] >> in->a & 1))
        return fail(s, FHR_E_INFEASIBLE, s->pc, "hold of '%s': no copy at %s", NAMEV(in->x),
                    loc_name(in->a, l));
    if (s->nholds == s->capholds) {
        size_t nc = s->capholds ? s->capholds * 2 : 16;
        hold *h = realloc(s->holds, nc * sizeof *h);
        if (!h)
            return FHR_E_NOMEM;
        s->holds = h;
        s->capholds = nc;
    }
    s->holds[s->nholds++] = (hold){in->x, in->a, s->depth, s->pc};
    return FHR_OK;
}

RULE(release)
{
    char l[24];
    long h = held_at(s, in->x, in->a);
    if (h < 0 || s->holds[h].depth != s->depth)
        return fail(s, FHR_E_INFEASIBLE, s->pc,
                    "release of '%s' at %s without a matching hold in this stage",
                    NAMEV(in->x), loc_name(in->a, l));
    memmove(&s->holds[h], &s->holds[h + 1], (s->nholds - (size_t)h - 1) * sizeof *s->holds);
    s->nholds--;
    return FHR_OK;
}

/* ---- bodies ---------------------------------------------------------------------------
 * Where a body runs, as the VM decides it (runtime/vm/vm.c, request.c): in a plan, at the
 * device of the first enter-phase ensure or move of one of its value arguments, else at the
 * lowest device holding all of them after the enter phase, else pinned when it holds them
 * all, else host; in a request, where the request requires its first required value
 * argument (else the first requirement, else host). Every value argument must have a copy
 * there: the VM leases them all at that location. */

static int body_at(V *s, uint8_t *slot)
{
    const uint32_t *x = s->run_x;
    const uint8_t *op = s->run_op;
    uint32_t n = s->run_n;
    int nvals = 0;
    for (uint32_t a = 0; a < n; a++)
        nvals += op[a] == RPLAN_OP_ARGVAL;
    if (s->scope == RPLAN_OP_REQUEST) {
        for (uint32_t a = 0; a < n; a++)
            for (size_t i = 0; op[a] == RPLAN_OP_ARGVAL && i < s->nreq; i++)
                if (s->req_v[i] == x[a]) {
                    *slot = s->req_s[i];
                    return 1;
                }
        *slot = s->nreq ? s->req_s[0] : fhr_loc_slot(fhr_loc_host());
        return 1;
    }
    for (size_t e = 0; e < s->nent; e++)
        for (uint32_t a = 0; a < n; a++)
            if (op[a] == RPLAN_OP_ARGVAL && x[a] == s->ent_v[e]) {
                *slot = s->ent_s[e];
                return 1;
            }
    if (!nvals) {
        *slot = fhr_loc_slot(fhr_loc_host());
        return 1;
    }
    int pinned = fhr_loc_slot(fhr_loc_pinned()), host = fhr_loc_slot(fhr_loc_host());
    for (int k = 0; k < FHR_LOC_SLOTS; k++) {
        if (fhr_loc_from_slot(k).kind != FHR_LOC_CUDA)
            continue;
        int all = 1;
        for (uint32_t a = 0; a < n && all; a++)
            all = op[a] != RPLAN_OP_ARGVAL || (s->where[x[a]] >> k & 1);
        if (all) {
            *slot = (uint8_t)k;
            return 1;
        }
    }
    int all = 1;
    for (uint32_t a = 0; a < n && all; a++)
        all = op[a] != RPLAN_OP_ARGVAL || (s->where[x[a]] >> pinned & 1);
    *slot = (uint8_t)(all ? pinned : host);
    return 1;
}

/* The built-in kernels' signatures (rplan(5)); other names are the engine's and are not
 * checked. 0, or the failure. */
static fhr_status check_signature(V *s)
{
    const char *name = S_(s->p, s->p->code[s->run_at].x);
    const uint8_t *op = s->run_op;
    uint32_t n = s->run_n;
    const char *want = NULL;
    int ok = 1;
    if (!strcmp(name, "touch") || !strcmp(name, "verify")) {
        want = !strcmp(name, "touch") ? "touch(value, ...)" : "verify(value, ...)";
        ok = n > 0;
        for (uint32_t a = 0; a < n; a++)
            ok &= op[a] == RPLAN_OP_ARGVAL;
    } else if (!strcmp(name, "spin")) {
        want = "spin(duration)";
        ok = n == 1 && op[0] == RPLAN_OP_ARGDUR;
    } else if (!strcmp(name, "ckks.keyswitch")) {
        want = "ckks.keyswitch(ciphertext, key [, batch])";
        ok = (n == 2 || n == 3) && op[0] == RPLAN_OP_ARGVAL && op[1] == RPLAN_OP_ARGVAL &&
             (n == 2 || op[2] == RPLAN_OP_ARGINT);
    } else {
        return FHR_OK;
    }
    if (!ok)
        return fail(s, FHR_E_INVALID, s->run_at, "bad arguments to the built-in kernel '%s': "
                    "it takes %s", name, want);
    if (!strcmp(name, "verify"))
        for (uint32_t a = 0; a < n; a++) {
            if (s->p->vals[s->run_x[a]].data == RPLAN_DATA_FILE ||
                s->p->vals[s->run_x[a]].data == RPLAN_DATA_ENGINE) {
                fail(s, FHR_E_INFEASIBLE, s->run_at, "verify of '%s': its content comes "
                     "from %s; only synth and zero content can be recomputed",
                     NAMEV(s->run_x[a]),
                     s->p->vals[s->run_x[a]].data == RPLAN_DATA_FILE ? "a file" : "the engine");
                note(s, -1, (long)s->run_x[a], "'%s' is declared here", NAMEV(s->run_x[a]));
                return FHR_E_INFEASIBLE;
            } else if (s->p->vals[s->run_x[a]].seeded && s->p->vals[s->run_x[a]].nfields) {
                /* the run's verify knows the 'b' and 'a' halves of a seeded value only */
                fail(s, FHR_E_INFEASIBLE, s->run_at, "verify of '%s': it has seeded fields; "
                     "verify recomputes a seeded value's 'b' and 'a' halves only (a seeded "
                     "value without fields(...))", NAMEV(s->run_x[a]));
                note(s, -1, (long)s->run_x[a], "'%s' is declared here", NAMEV(s->run_x[a]));
                return FHR_E_INFEASIBLE;
            }
        }
    return FHR_OK;
}

/* A body call with all its arguments read: its signature, then its values at its location. */
static fhr_status check_body(V *s)
{
    fhr_status st = check_signature(s);
    if (st)
        return st;
    uint8_t slot;
    body_at(s, &slot);
    for (uint32_t a = 0; a < s->run_n; a++) {
        if (s->run_op[a] != RPLAN_OP_ARGVAL)
            continue;
        uint32_t v = s->run_x[a];
        int there = s->scope == RPLAN_OP_REQUEST ? held_at(s, v, slot) >= 0
                                                 : (int)(s->where[v] >> slot & 1);
        for (size_t i = 0; s->scope == RPLAN_OP_REQUEST && !there && i < s->nreq; i++)
            there = s->req_v[i] == v && s->req_s[i] == slot;
        if (!there) {
            char l[24];
            fail(s, FHR_E_INFEASIBLE, s->run_at,
                 s->scope == RPLAN_OP_REQUEST
                     ? "run %s: argument '%s' is not required at %s, where the body runs"
                     : "run %s: argument '%s' has no copy at %s, where the body runs",
                 S_(s->p, s->p->code[s->run_at].x), NAMEV(v), loc_name(slot, l));
            note(s, -1, (long)v, "'%s' is declared here", NAMEV(v));
            return FHR_E_INFEASIBLE;
        }
    }
    return FHR_OK;
}

RULE(run)
{
    if (in->y > RP_MAX_ARGS)
        return fail(s, FHR_E_INVALID, s->pc, "a kernel call takes at most %d arguments",
                    RP_MAX_ARGS);
    s->args = in->y;
    s->run_at = s->pc;
    s->run_n = 0;
    return in->y == 0 ? check_body(s) : FHR_OK;
}

static fhr_status arg_done(V *s, const rp_ins *in)
{
    s->run_op[s->run_n] = in->op;
    s->run_x[s->run_n++] = in->x;
    return s->args == 0 ? check_body(s) : FHR_OK;
}

RULE(argval)
{
    fhr_status st = live(s, in->x, "use");
    return st ? st : arg_done(s, in);
}

RULE(argconst)
{
    return arg_done(s, in);
}

typedef fhr_status (*rule_fn)(V *, const rp_ins *);
static const rule_fn rules[RPLAN_OP_COUNT_] = {
#define OP(id, text, x, y, a, b, ctx, rule) [RPLAN_OP_##id] = vr_##rule,
#include "runtime/program/opcodes.def"
#undef OP
};

/* ---- the pass ------------------------------------------------------------------------ */

static fhr_status check_context(V *s, const rp_ins *in)
{
    const rp_opinfo *oi = &rp_ops[in->op];
    const char *op = oi->name;
    if (s->args && oi->ctx != CTX_ARG)
        return fail(s, FHR_E_INVALID, s->pc, "'run' expects %u more arguments", s->args);
    switch (oi->ctx) {
    case CTX_ITEM:
        if (s->scope)
            return fail(s, FHR_E_INVALID, s->pc, "'%s' inside a plan or request", op);
        if (in->op == RPLAN_OP_ENDSTAGE && s->depth == 0)
            return fail(s, FHR_E_INVALID, s->pc, "'endstage' without an open stage");
        break;
    case CTX_SCOPE:
        if (!s->scope)
            return fail(s, FHR_E_INVALID, s->pc, "'%s' outside a plan or request", op);
        break;
    case CTX_REQ:
        if (s->scope != RPLAN_OP_REQUEST)
            return fail(s, FHR_E_INVALID, s->pc, "'%s' outside a request", op);
        break;
    case CTX_ACTION:
        if (s->scope == RPLAN_OP_REQUEST ||
            (s->scope == RPLAN_OP_PLAN && s->phase != FHR_PHASE_RECLAIM &&
             s->phase != FHR_PHASE_ENTER && s->phase != FHR_PHASE_EXIT))
            return fail(s, FHR_E_INVALID, s->pc, "'%s' outside an action block", op);
        break;
    case CTX_BODY:
        if (!s->scope || s->phase != FHR_PHASE_BODY)
            return fail(s, FHR_E_INVALID, s->pc, "'%s' outside a body block", op);
        break;
    case CTX_ARG:
        if (!s->args)
            return fail(s, FHR_E_INVALID, s->pc, "'%s' without a 'run'", op);
        s->args--;
        break;
    }
    return FHR_OK;
}

static fhr_status run_pass(V *s)
{
    const rplan_program *p = s->p;
    fhr_status st = check_tables(s);
    if (st)
        return st;
    if ((st = check_positions(s)))
        return st;
    if (p->ncode > RP_MAX_INSTRS)
        return fail(s, FHR_E_INVALID, -1, "program of %u instructions is too long (at most %u)",
                    p->ncode, RP_MAX_INSTRS);
    for (uint32_t i = 0; i < p->nbuds; i++) {
        s->hasb |= 1ull << p->buds[i].slot;
        s->budget[p->buds[i].slot] = p->buds[i].nbytes;
    }
    for (size_t i = 0; i < s->nov; i++) {
        int slot = fhr_loc_slot(s->ov[i].loc);
        if (slot < 0 || slot >= FHR_LOC_SLOTS)
            return fail(s, FHR_E_INVALID, -1, "budget override %zu has an invalid location", i);
        s->hasb |= 1ull << slot;
        s->budget[slot] = s->ov[i].nbytes;
    }
    /* the declared initial state */
    for (uint32_t i = 0; i < p->nvals; i++) {
        const rp_value *v = &p->vals[i];
        s->gone[i] = -1;
        if (v->init_slot == RP_NOLOC)
            continue;
        char l[24], what[200];
        snprintf(what, sizeof what, "initial placement of '%s' at %s", S_(p, v->name),
                 loc_name(v->init_slot, l));
        s->pc = -1;
        if ((st = charge(s, v->init_slot, rp_value_charge(p, v, v->init_slot), what))) {
            s->f->value = i;
            return st;
        }
        s->where[i] = 1ull << v->init_slot;
        if (fhr_loc_from_slot(v->init_slot).kind == FHR_LOC_CUDA)
            s->onebuf[i] = 1ull << v->init_slot;
    }
    for (uint32_t pc = 0; pc < p->ncode; pc++) {
        const rp_ins *in = &p->code[pc];
        s->pc = pc;
        if (in->op >= RPLAN_OP_COUNT_)
            return fail(s, FHR_E_INVALID, pc, "instruction %u: unknown opcode %u", pc, in->op);
        const rp_opinfo *oi = &rp_ops[in->op];
        if (in->c != 0)
            return fail(s, FHR_E_INVALID, pc, "instruction %u (%s): reserved byte is not zero",
                        pc, oi->name);
        if ((st = check_operand(s, pc, oi->x, in->x, "X")) ||
            (st = check_operand(s, pc, oi->y, in->y, "Y")) ||
            (st = check_operand(s, pc, oi->a, in->a, "A")) ||
            (st = check_operand(s, pc, oi->b, in->b, "B")) || (st = check_limbs(s, pc, in)))
            return st;
        if ((st = check_context(s, in)))
            return st;
        if ((st = rules[in->op](s, in)))
            return st;
    }
    s->pc = p->ncode;
    if (s->args)
        return fail(s, FHR_E_INVALID, (long)p->ncode - 1, "'run' expects %u more arguments",
                    s->args);
    if (s->scope)
        return fail(s, FHR_E_INVALID, s->scope_at, "plan or request is never closed");
    if (s->depth)
        return fail(s, FHR_E_INVALID, (long)p->ncode - 1, "stage is never closed");
    if (s->nholds) {
        char l[24];
        return fail(s, FHR_E_INFEASIBLE, s->holds[0].instr, "hold of '%s' at %s is never "
                    "released", NAMEV(s->holds[0].v), loc_name(s->holds[0].slot, l));
    }
    return FHR_OK;
}

fhr_status rp_verify(const rplan_program *p, rp_vfail *f)
{
    return rp_verify_budgets(p, NULL, 0, NULL, f);
}

fhr_status rp_verify_budgets(const rplan_program *p, const fhr_budget *ov, size_t nov,
                             uint64_t *peak, rp_vfail *f)
{
    V s;
    memset(&s, 0, sizeof s);
    memset(f, 0, sizeof *f);
    f->instr = f->value = f->note_instr = f->note_value = -1;
    s.p = p;
    s.f = f;
    s.ov = ov;
    s.nov = nov;
    size_t nv = p->nvals ? p->nvals : 1;
    s.where = calloc(nv, sizeof *s.where);
    s.gone = calloc(nv, sizeof *s.gone);
    s.onebuf = calloc(nv, sizeof *s.onebuf);
    int nomem = !s.where || !s.gone || !s.onebuf;
    uint32_t ncut = 0;
    for (uint32_t i = 0; i < p->nvals; i++)
        ncut += p->vals[i].cut != 0;
    if (ncut && !nomem) {
        s.cix = calloc(nv, sizeof *s.cix);
        s.cutl = calloc((size_t)ncut * FHR_LOC_SLOTS, sizeof *s.cutl);
        s.cutp = calloc((size_t)ncut * FHR_LOC_SLOTS, sizeof *s.cutp);
        nomem = !s.cix || !s.cutl || !s.cutp;
        for (uint32_t i = 0, k = 0; !nomem && i < p->nvals; i++)
            if (p->vals[i].cut)
                s.cix[i] = ++k;
    }
    fhr_status st;
    if (nomem) {
        st = FHR_E_NOMEM;
        snprintf(f->msg, sizeof f->msg, "out of memory");
    } else {
        st = run_pass(&s);
        if (st == FHR_E_NOMEM)
            snprintf(f->msg, sizeof f->msg, "out of memory");
    }
    if (peak)
        memcpy(peak, s.peak, sizeof s.peak);
    free(s.where);
    free(s.gone);
    free(s.onebuf);
    free(s.cix);
    free(s.cutl);
    free(s.cutp);
    free(s.holds);
    free(s.req_v);
    free(s.req_s);
    free(s.req_at);
    free(s.req_l);
    free(s.ent_v);
    free(s.ent_s);
    return st;
}
