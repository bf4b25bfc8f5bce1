/* compiler/disasm.c — the disassembler: declarations, then one line per instruction
 * (operands formatted from the opcode table), indented by nesting, with the source
 * line interleaved wherever the line changes (objdump -S style). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "compiler/out.h"
#include "runtime/program/program.h"

static void pstr(rp_out *o, const char *s)
{
    rp_out_put(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            rp_out_printf(o, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            rp_out_printf(o, "\\x%02x", c);
        else
            rp_out_put(o, s, 1);
    }
    rp_out_put(o, "\"", 1);
}

static const char *size_text(uint64_t n, char *buf)
{
    return fhr_size_format(n, FHR_SIZE_EXACT, buf, 40);
}

static const char *dur_text(uint64_t n, char *buf)
{
    static const char *const u[] = {"s", "ms", "us"};
    static const uint64_t m[] = {1000000000ull, 1000000ull, 1000ull};
    for (int i = 0; i < 3; i++)
        if (n >= m[i] && n % m[i] == 0) {
            snprintf(buf, 40, "%" PRIu64 " %s", n / m[i], u[i]);
            return buf;
        }
    snprintf(buf, 40, "%" PRIu64 " ns", n);
    return buf;
}

static const char *locs(uint8_t slot, char *buf)
{
    return fhr_loc_format(fhr_loc_from_slot(slot), buf, 24);
}

/* The header: the version the program is written as, the counts and the budgets. */
static void disasm_header(const rplan_program *p, rp_out *o)
{
    char b1[40], b2[40];
    const char *S = p->strs;
    /* the version it is written as */
    rp_out_printf(o, "; rplan bytecode %d.%d", RP_MAJOR, rp_prog_minor(p));
    if (S[p->src_name])
        rp_out_printf(o, ", source %s", S + p->src_name);
    rp_out_printf(o, "\n; %u value%s, %u budget%s, %u polic%s, %u instruction%s, %u constant%s\n",
                  p->nvals, p->nvals == 1 ? "" : "s", p->nbuds, p->nbuds == 1 ? "" : "s",
                  p->npols, p->npols == 1 ? "y" : "ies", p->ncode, p->ncode == 1 ? "" : "s",
                  p->ncons, p->ncons == 1 ? "" : "s");
    for (uint32_t i = 0; i < p->nbuds; i++)
        rp_out_printf(o, "budget  %-8s %s\n", locs(p->buds[i].slot, b1), size_text(p->buds[i].nbytes, b2));
}

/* One line per value, as declared. */
static void disasm_values(const rplan_program *p, rp_out *o)
{
    char b1[40], b2[40];
    const char *S = p->strs;
    for (uint32_t i = 0; i < p->nvals; i++) {
        const rp_value *v = &p->vals[i];
        rp_out_printf(o, "value   %-4u %-12s %-10s %-10s", i, S + v->name, size_text(v->nbytes, b1),
           v->mode ? "exclusive" : "replicable");
        if (v->recov)
            rp_out_printf(o, " source");
        else
            rp_out_printf(o, " at %s init", locs(v->init_slot, b2));
        if (v->data == RPLAN_DATA_SYNTH)
            rp_out_printf(o, " synth(%" PRIu64 ")", v->arg);
        else if (v->data == RPLAN_DATA_FILE) {
            rp_out_printf(o, " file(");
            pstr(o, S + v->arg);
            rp_out_printf(o, ")");
        } else if (v->data == RPLAN_DATA_ENGINE)
            rp_out_printf(o, " engine.%s(%" PRIu64 ")", S + v->loader, v->arg);
        else
            rp_out_printf(o, " zero");
        if (v->nfields) {
            rp_out_printf(o, " fields(");
            for (uint32_t k = 0; k < v->nfields; k++) {
                const rp_fieldrec *f = &p->fields[v->field0 + k];
                rp_out_printf(o, "%s%s%s = %s", k ? ", " : "", f->regen ? "seeded " : "",
                              S + f->name, size_text(f->nbytes, b2));
            }
            rp_out_printf(o, ")");
        }
        if (v->cut && v->limb_alpha)
            rp_out_printf(o, " limbs(%u, %u, %u, %u)", v->limb_q, v->limb_special,
                          v->limb_parts, v->limb_alpha);
        else if (v->cut && v->limb_parts > 1)
            rp_out_printf(o, " limbs(%u, %u, %u)", v->limb_q, v->limb_special, v->limb_parts);
        else if (v->cut)
            rp_out_printf(o, " limbs(%u, %u)", v->limb_q, v->limb_special);
        if (v->prio)
            rp_out_printf(o, " priority %d", v->prio);
        if (v->seeded) {
            rp_out_printf(o, " seeded %s(%" PRIu64 ")", S + v->gen, v->seed);
            if (v->keep & FHR_KEEP_HOST)
                rp_out_printf(o, " keep host");
            if (v->keep & FHR_KEEP_PINNED)
                rp_out_printf(o, " keep pinned");
        }
        rp_out_printf(o, "  ; %u:%u\n", v->line, v->col);
    }
}

/* The kernels' costs and the policies' chains. */
static void disasm_kernels_policies(const rplan_program *p, rp_out *o)
{
    char b1[40];
    const char *S = p->strs;
    for (uint32_t i = 0; i < p->nkerns; i++) {
        const rp_kernrec *k = &p->kerns[i];
        if (k->kind == RPLAN_COST_READS)
            rp_out_printf(o, "kernel  %s reads %s\n", S + k->name, size_text(k->imm, b1));
        else
            rp_out_printf(o, "kernel  %s cost %" PRIu64 " ns\n", S + k->name, k->imm);
    }
    for (uint32_t i = 0; i < p->npols; i++) {
        const rp_policyrec *r = &p->pols[i];
        rp_out_printf(o, "policy  %-4u %s = %s(", i, S + r->name,
           r->kind == RPLAN_POLICY_LOOKAHEAD ? "lookahead" : "tiered_lru");
        for (uint32_t c = 0; c < r->n; c++) {
            const uint8_t *ch = p->chains[r->first + c].s;
            for (int k = 0; k < RP_MAX_CHAIN && ch[k] != RP_NOLOC; k++)
                rp_out_printf(o, "%s%s", k ? " -> " : c ? ", " : "", locs(ch[k], b1));
        }
        rp_out_printf(o, ")\n");
    }
}

/* The source line `line` (starting at byte a of the embedded source) as a comment. */
static void echo_line(const rplan_program *p, rp_out *o, size_t a, uint32_t line)
{
    size_t e = a;
    while (e < p->srclen && p->src[e] != '\n' && p->src[e] != '\r')
        e++;
    while (a < e && (p->src[a] == ' ' || p->src[a] == '\t'))
        a++;
    /* the source as text: a comment may hold any byte, and bytecode any source */
    char *ex = malloc(e - a + 1);
    if (ex) {
        memcpy(ex, p->src + a, e - a);
        rp_text_clean(ex, e - a);
        rp_out_printf(o, "%30s; %u: %.*s\n", "", line, (int)(e - a), ex);
        free(ex);
    }
}

/* An instruction's operands as text into ops (cap bytes). */
static void operands(const rplan_program *p, const rp_ins *in, const rp_opinfo *oi, char *ops,
                     size_t cap)
{
    size_t n = 0;
    ops[0] = '\0';
    char b1[40], b2[40];
    const char *S = p->strs;
#define ADD(...) n += (size_t)snprintf(ops + n, n < cap ? cap - n : 0, __VA_ARGS__)
    uint32_t xy[2] = {in->x, in->y};
    uint8_t kxy[2] = {oi->x, oi->y};
    for (int k = 0; k < 2 && n < cap; k++) {
        switch (kxy[k]) {
        case RPLAN_OPD_VAL: ADD("%s", S + p->vals[xy[k]].name); break;
        case RPLAN_OPD_STR: {
            rp_out t = {0};
            pstr(&t, S + xy[k]);
            ADD("%s%s", k ? " " : "", t.s ? t.s : "\"\"");
            free(t.s);
            break;
        }
        case RPLAN_OPD_CONST: {
            uint64_t v = p->cons[xy[k]];
            if (in->op == RPLAN_OP_ARGDUR)
                ADD("%s", dur_text(v, b1));
            else if (in->op == RPLAN_OP_ARGINT)
                ADD("%" PRIu64, v);
            else
                ADD("%s", size_text(v, b1));
            break;
        }
        case RPLAN_OPD_POL: ADD(" using %s", S + p->pols[xy[k]].name); break;
        case RPLAN_OPD_COUNT: ADD("/%u", xy[k]); break;
        case RPLAN_OPD_LIMBS:
            if (xy[k])
                ADD(" level %u", xy[k] - 1);
            break;
        default: break;
        }
        if (k == 0 && n < cap) {
            if (oi->a == RPLAN_OPD_LOC)
                ADD(" %s %s", in->op == RPLAN_OP_MOVE ? "->" : in->op == RPLAN_OP_RESERVE
                                                                   ? "at"
                                                                   : "@",
                    locs(in->a, b2));
            else if (oi->a == RPLAN_OPD_PHASE)
                ADD("%s", fhr_phase_name((fhr_phase)in->a));
            if (oi->b == RPLAN_OPD_LOCOPT && in->b != RP_NOLOC && n < cap)
                ADD(" from %s", locs(in->b, b2));
        }
    }
#undef ADD
}

/* The instructions, each under the source line it came from (unless flags leave it out). */
static void disasm_code(const rplan_program *p, rp_out *o, unsigned flags)
{
    /* line starts of the embedded source */
    size_t *ls = NULL, nls = 0;
    if (p->src && !(flags & RPLAN_DISASM_NOSOURCE)) {
        size_t n = 1;
        for (uint32_t i = 0; i < p->srclen; i++)
            n += p->src[i] == '\n';
        ls = malloc(n * sizeof *ls);
        if (ls) {
            ls[nls++] = 0;
            for (uint32_t i = 0; i < p->srclen; i++)
                if (p->src[i] == '\n')
                    ls[nls++] = i + 1;
        }
    }
    uint32_t last_line = 0;
    int depth = 0;
    for (uint32_t pc = 0; pc < p->ncode; pc++) {
        const rp_ins *in = &p->code[pc];
        const rp_opinfo *oi = &rp_ops[in->op];
        uint32_t line = p->lines[pc].line;
        if (ls && line && line != last_line && line <= nls && in->op != RPLAN_OP_END &&
            in->op != RPLAN_OP_ENDSTAGE)
            echo_line(p, o, ls[line - 1], line);
        last_line = line;
        if (in->op == RPLAN_OP_ENDSTAGE || in->op == RPLAN_OP_END)
            depth--;
        char ops[600];
        operands(p, in, oi, ops, sizeof ops);
        char mn[64];
        snprintf(mn, sizeof mn, "%*s%s", 2 * (depth > 0 ? depth : 0), "", oi->name);
        rp_out_printf(o, "%6u  %-16s %-40s ; %u:%u\n", pc, mn, ops, line, p->lines[pc].col);
        if (in->op == RPLAN_OP_STAGE || in->op == RPLAN_OP_PLAN || in->op == RPLAN_OP_REQUEST)
            depth++;
    }
    free(ls);
}

static void disasm(const rplan_program *p, rp_out *o, unsigned flags)
{
    disasm_header(p, o);
    disasm_values(p, o);
    disasm_kernels_policies(p, o);
    disasm_code(p, o, flags);
}

int rplan_disasm(const rplan_program *p, FILE *f, unsigned flags)
{
    if (!p || !f)
        return -1;
    rp_out o = {.f = f};
    disasm(p, &o, flags);
    return o.fail || ferror(f) ? -1 : 0;
}

char *rplan_disasm_string(const rplan_program *p, unsigned flags)
{
    if (!p)
        return NULL;
    rp_out o = {0};
    rp_out_put(&o, "", 0);
    disasm(p, &o, flags);
    if (o.fail) {
        free(o.s);
        return NULL;
    }
    return o.s;
}
