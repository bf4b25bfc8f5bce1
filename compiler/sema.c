/* compiler/sema.c — the semantic pass's entry point: the predefined constants, the
 * top-level statement list, budget overrides and the budget table, the warnings (unused
 * declarations and budgets), then cleanup. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/sema.h"

/* 1 when warnings of the rule named `name` are off (its own name or its group: the part
 * before the first '-', "unused"). */
static int warning_off(const rplan_compile_opts *o, const char *name)
{
    for (size_t i = 0; o && i < o->nwarn_off; i++) {
        const char *w = o->warn_off[i];
        size_t n = w ? strlen(w) : 0;
        if (n && !strncmp(name, w, n) && (name[n] == '\0' || name[n] == '-'))
            return 1;
    }
    return 0;
}

static void warn(S *s, rp_loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void warn(S *s, rp_loc at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const rplan_rule *r = rplan_rule_of(msg);
    if (warning_off(s->opts, r->name))
        return;
    if (s->opts && s->opts->warn_error)
        rp_diag(s->dc, RPLAN_ERROR, at, "%s [-Werror]", msg);
    else
        rp_diag(s->dc, RPLAN_WARNING, at, "%s", msg);
}

/* Declarations nothing uses, and budgets at locations where nothing is ever placed. A
 * name that starts with '_' is exempt (a deliberate placeholder). */
static void warn_unused(S *s)
{
    for (size_t i = 0; i < s->nsyms; i++) {
        const sym *y = &s->syms[i];
        if (y->used || !y->decl.first_line || y->name[0] == '_')
            continue;
        rp_loc at = y->decl;
        at.last_line = at.first_line;
        at.last_column = at.first_column + (uint32_t)strlen(y->name) - 1;
        warn(s, at, "%s '%s' is never used", rp_sema_sym_kind_name(y->kind), y->name);
    }
    const rplan_program *p = s->p;
    unsigned char seen[FHR_LOC_SLOTS] = {0};
    for (uint32_t i = 0; i < p->nvals; i++)
        if (p->vals[i].init_slot < FHR_LOC_SLOTS)
            seen[p->vals[i].init_slot] = 1;
    for (uint32_t i = 0; i < p->ncode; i++) {
        const rp_ins *in = &p->code[i];
        const rp_opinfo *oi = &rp_ops[in->op];
        if (oi->a == RPLAN_OPD_LOC && in->a < FHR_LOC_SLOTS)
            seen[in->a] = 1;
        if (oi->b == RPLAN_OPD_LOCOPT && in->b < FHR_LOC_SLOTS)
            seen[in->b] = 1;
    }
    for (uint32_t i = 0; i < p->nchains; i++)
        for (int k = 0; k < RP_MAX_CHAIN; k++)
            if (p->chains[i].s[k] < FHR_LOC_SLOTS)
                seen[p->chains[i].s[k]] = 1;
    for (int slot = 0; slot < FHR_LOC_SLOTS; slot++) {
        if (!s->has_budget[slot] || seen[slot] || !s->budget_decl[slot].first_line)
            continue;
        char b[24];
        warn(s, s->budget_decl[slot], "budget for %s is never used: nothing is placed, moved, "
             "required or reserved there", rp_sema_slot_name((uint8_t)slot, b, sizeof b));
    }
}

size_t rp_sema(rp_node *root, rp_dctx *dc, const rplan_compile_opts *opts, rplan_program *p)
{
    S s;
    memset(&s, 0, sizeof s);
    s.dc = dc;
    s.opts = opts;
    s.p = p;
    size_t before = dc->nerrors;
    cx top = {CX_TOP, FHR_PHASE_NONE, "file"};
    /* predefined constants (no declaration position): the MPI rank and world size */
    uint32_t world = opts && opts->world_size ? opts->world_size : 1;
    uint32_t rank = opts ? opts->rank : 0;
    if (rank >= world)
        ERR(&s, ((rp_loc){0, 0, 0, 0}), "rank %" PRIu32 " is out of range for world size %" PRIu32,
            rank, world);
    static const char *const predef[] = {"rank", "world_size"};
    for (int i = 0; i < 2 && !s.oom; i++) {
        sym *y = rp_sema_add_sym(&s, predef[i], SYM_CONST, (rp_loc){0, 0, 0, 0});
        if (y) {
            y->v = i ? world : rank;
            y->vkind = K_INT;
        }
    }
    s.root = root;
    if (dc->nerrors == before)
        rp_sema_lower_list(&s, root, &top);
    if (opts)
        for (size_t i = 0; i < opts->nbudget_override; i++) {
            int slot = fhr_loc_slot(opts->budget_override[i].loc);
            if (slot < 0) {
                ERR(&s, ((rp_loc){0, 0, 0, 0}), "budget override %zu has an invalid location",
                    i);
                continue;
            }
            s.has_budget[slot] = 1;
            s.budget[slot] = opts->budget_override[i].nbytes;
            s.budget_decl[slot] = (rp_loc){0, 0, 0, 0};
        }
    for (int slot = 0; slot < FHR_LOC_SLOTS; slot++) {
        if (!s.has_budget[slot])
            continue;
        if (p->nbuds == p->capbuds) {
            uint32_t nc = p->capbuds ? p->capbuds * 2 : 8;
            rp_budgetrec *v = realloc(p->buds, nc * sizeof *v);
            if (!v) {
                s.oom = 1;
                break;
            }
            p->buds = v;
            p->capbuds = nc;
        }
        rp_loc at = s.budget_decl[slot]; /* zero for an override */
        p->buds[p->nbuds++] = (rp_budgetrec){(uint8_t)slot, s.budget[slot], at.first_line,
                                             (uint16_t)at.first_column};
    }
    if (s.oom)
        ERR(&s, ((rp_loc){0, 0, 0, 0}), "out of memory");
    else if (dc->nerrors == before)
        warn_unused(&s);
    free(s.syms);
    free(s.ht);
    free(s.kht);
    return dc->nerrors - before;
}
