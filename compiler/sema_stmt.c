/* compiler/sema_stmt.c — statements: each kind checked against its context and phase
 * order, scopes and blocks lowered recursively, loops unrolled, actions emitted. */
#include <inttypes.h>
#include <string.h>

#include "compiler/sema.h"

static const char *phase_word(fhr_phase ph)
{
    return ph == FHR_PHASE_RECLAIM ? "reclaim" : ph == FHR_PHASE_RESERVE ? "reserve"
         : ph == FHR_PHASE_ENTER   ? "enter"   : ph == FHR_PHASE_BODY    ? "body"
                                                                         : "exit";
}

static int in(const cx *c, int k1, int k2, int k3)
{
    return c->kind == k1 || c->kind == k2 || c->kind == k3;
}

/* `level L` of a require or ensure of value v at slot: the limb count L + 1 into *y (a
 * device copy with q-limbs 0..L suffices). 0 when refused. */
static int level_limbs(S *s, rp_node *lv, uint32_t v, uint8_t slot, uint32_t *y)
{
    const rp_value *x = &s->p->vals[v];
    const char *nm = rp_prog_cstr(s->p, x->name);
    rp_int l;
    int k;
    char b[48];
    if (!rp_sema_eval_signed(s, lv, &l, &k))
        return 0;
    if (k != K_INT) {
        ERR(s, lv->loc, "a level must be an integer, not a %s", k == K_SIZE ? "size" : "duration");
        return 0;
    }
    if (!x->cut) {
        ERR(s, lv->loc, "a level needs a limb-cut value; '%s' has no limbs(...)", nm);
        NOTE(s, ((rp_loc){x->line, x->col, x->line, x->col + (x->len ? x->len : 1) - 1u}),
             "'%s' is declared here", nm);
        return 0;
    }
    if (fhr_loc_from_slot(slot).kind != FHR_LOC_CUDA) {
        ERR(s, lv->loc, "a level names a partial device copy; host and pinned copies are whole");
        return 0;
    }
    if (l < 0 || l >= x->limb_q) {
        ERR(s, lv->loc, "level %s of '%s' is out of range: it has %u q-limbs (levels 0 to %u)",
            rp_int_str(l, b, sizeof b), nm, x->limb_q, x->limb_q - 1);
        return 0;
    }
    *y = (uint32_t)l + 1;
    return 1;
}

static void vref_loc_op(S *s, rp_node *n, int op)
{
    uint32_t v, y = 0;
    uint8_t slot = 0;
    int ok = rp_sema_resolve_value(s, n->a, &v);
    if (n->b && !rp_sema_resolve_loc(s, n->b, &slot))
        ok = 0;
    /* require, ensure and drop: c is the level */
    if (ok && (op == RPLAN_OP_REQUIRE || op == RPLAN_OP_ENSURE || op == RPLAN_OP_DROP) && n->c &&
        !level_limbs(s, n->c, v, slot, &y))
        ok = 0;
    if (ok)
        rp_sema_emit(s, op, slot, 0, v, y, n->loc);
}

static void lower_scope(S *s, rp_node *n, int op, cx *c)
{
    uint32_t name;
    if (!in(c, CX_TOP, CX_STAGE, -1)) {
        ERR(s, n->loc, "'%s' is only allowed at the top level or inside a stage",
            op == RPLAN_OP_STAGE ? "stage" : op == RPLAN_OP_PLAN ? "plan" : "request");
        return;
    }
    int ok = rp_sema_interp(s, n->a, &name);
    uint32_t pol = 0;
    if (op == RPLAN_OP_REQUEST) {
        sym *y = rp_sema_lookup(s, n->b->text);
        if (y)
            y->used = 1;
        if (!y || y->kind != SYM_POLICY) {
            if (y) {
                ERR(s, n->b->loc, "'%s' is a %s, not a policy", n->b->text,
                    rp_sema_sym_kind_name(y->kind));
                DECL_NOTE(s, y, n->b->text);
            } else {
                rp_sema_unknown_name(s, n->b->loc, "policy", n->b->text, SYM_POLICY);
            }
            ok = 0;
        } else {
            pol = y->first;
        }
    }
    if (!ok)
        return;
    rp_loc at = rp_sema_join(n->loc, n->a->loc);
    if (op == RPLAN_OP_STAGE && s->nstages == RP_MAX_STAGE_DEPTH) {
        ERR(s, at, "stages are nested too deeply (at most %d levels)", RP_MAX_STAGE_DEPTH);
        return;
    }
    s->nstages += op == RPLAN_OP_STAGE;
    rp_sema_emit(s, op, 0, 0, name, pol, at);
    cx inner = {op == RPLAN_OP_STAGE  ? CX_STAGE
                : op == RPLAN_OP_PLAN ? CX_PLAN
                                      : CX_REQ,
                FHR_PHASE_NONE, op == RPLAN_OP_PLAN ? "plan" : "request"};
    rp_node *body = op == RPLAN_OP_REQUEST ? n->c : n->b;
    rp_sema_lower_list(s, body, &inner);
    rp_sema_emit(s, op == RPLAN_OP_STAGE ? RPLAN_OP_ENDSTAGE : RPLAN_OP_END, 0, 0, 0, 0,
         n->end.first_line ? n->end : at);
    s->nstages -= op == RPLAN_OP_STAGE;
}

static const char *ctx_hint_action =
    "actions go at the top level, in a stage, or in a plan's reclaim, enter or exit block";

/* budget, const, value, policy, kernel: declarations, at the top level only. */
static void lower_decl(S *s, rp_node *n, const cx *c)
{
    static const char *const w[] = {"budget", "const", "value", "policy"};
    const char *word = n->kind == S_KERNEL ? "kernel" : w[n->kind - S_BUDGET];
    if (c->kind != CX_TOP) {
        ERR(s, n->loc, "'%s' declarations are only allowed at the top level", word);
        return;
    }
    if (n->kind == S_BUDGET)
        rp_sema_decl_budget(s, n);
    else if (n->kind == S_CONST)
        rp_sema_decl_const(s, n);
    else if (n->kind == S_VALUE)
        rp_sema_decl_value(s, n);
    else if (n->kind == S_POLICY)
        rp_sema_decl_policy(s, n);
    else
        rp_sema_decl_kernel(s, n);
}

/* reclaim, enter, body, exit: a block of a plan (a request has a body only), in order. */
static void lower_phase(S *s, rp_node *n, cx *c)
{
    fhr_phase ph = (fhr_phase)n->op;
    const char *w = phase_word(ph);
    if (c->kind == CX_REQ && ph != FHR_PHASE_BODY) {
        ERR(s, n->loc, "'%s' block is not allowed in a request (a request has require, "
                       "reserve and body)", w);
        return;
    }
    if (c->kind != CX_PLAN && c->kind != CX_REQ) {
        ERR(s, n->loc, "'%s' block is only allowed inside a %s", w,
            ph == FHR_PHASE_BODY ? "plan or request" : "plan");
        return;
    }
    if (ph == c->phase) {
        ERR(s, n->loc, "duplicate '%s' block in %s", w, c->what);
        return;
    }
    if (ph < c->phase) {
        ERR(s, n->loc, "'%s' block after '%s'; a %s runs reclaim, reserve, enter, body, "
                       "exit in that order", w, phase_word(c->phase), c->what);
        return;
    }
    c->phase = ph;
    rp_sema_emit(s, RPLAN_OP_PHASE, (uint8_t)ph, 0, 0, 0, n->loc);
    cx inner = {ph == FHR_PHASE_BODY ? CX_BODY : CX_ACTS, ph, c->what};
    rp_sema_lower_list(s, n->a, &inner);
}

/* reserve LOC SIZE ["label"]: in a plan or request, before its enter and body. */
static void lower_reserve(S *s, rp_node *n, cx *c)
{
    if (c->kind != CX_PLAN && c->kind != CX_REQ) {
        ERR(s, n->loc, "'reserve' is only allowed inside a plan or request");
        return;
    }
    if (c->phase > FHR_PHASE_RESERVE) {
        ERR(s, n->loc, "'reserve' after the '%s' block; a %s runs reclaim, reserve, enter, "
                       "body, exit in that order", phase_word(c->phase), c->what);
        return;
    }
    c->phase = FHR_PHASE_RESERVE;
    uint8_t slot;
    uint64_t v;
    uint32_t k, label = 0;
    int ok = rp_sema_resolve_loc(s, n->a, &slot);
    if (!rp_sema_eval_kind(s, n->b, K_SIZE, "a reservation", &v))
        ok = 0;
    if (n->c && !rp_sema_interp(s, n->c, &label))
        ok = 0;
    if (!ok)
        return;
    if (!rp_prog_const(s->p, v, &k)) {
        s->oom = 1;
        return;
    }
    rp_sema_emit(s, RPLAN_OP_RESERVE, slot, 0, k, label, n->loc);
}

/* ensure, move, drop, discard: actions where actions go. */
static void lower_action(S *s, rp_node *n, const cx *c)
{
    static const char *const w[] = {"ensure", "move", "drop", "discard"};
    static const int ops[] = {RPLAN_OP_ENSURE, RPLAN_OP_MOVE, RPLAN_OP_DROP, RPLAN_OP_DISCARD};
    int i = n->kind - S_ENSURE;
    if (!in(c, CX_TOP, CX_STAGE, CX_ACTS)) {
        ERR(s, n->loc, "'%s' is not allowed here; %s", w[i], ctx_hint_action);
        return;
    }
    if (n->kind != S_MOVE) {
        vref_loc_op(s, n, ops[i]);
        return;
    }
    uint32_t v;
    uint8_t to = 0, from = RP_NOLOC;
    int ok = rp_sema_resolve_value(s, n->a, &v);
    if (!rp_sema_resolve_loc(s, n->b, &to))
        ok = 0;
    if (n->c && !rp_sema_resolve_loc(s, n->c, &from))
        ok = 0;
    if (ok && from == to) {
        ERR(s, n->c->loc, "move from and to the same location");
        ok = 0;
    }
    if (ok)
        rp_sema_emit(s, RPLAN_OP_MOVE, to, from, v, 0, n->loc);
}

/* One argument of a kernel call into *out: a value, or a constant (int, size, duration).
 * 0 when refused (s->oom on memory). */
static int lower_arg(S *s, rp_node *a, rp_ins *out)
{
    sym *y = (a->kind == N_NAME || a->kind == N_INDEX) && !rp_sema_lookup_loop(s, a->text)
                 ? rp_sema_lookup(s, a->text)
                 : NULL;
    if (y && y->kind == SYM_VALUE) {
        uint32_t v;
        if (!rp_sema_resolve_value(s, a, &v))
            return 0;
        *out = (rp_ins){RPLAN_OP_ARGVAL, 0, 0, 0, v, 0};
        return 1;
    }
    uint64_t v;
    int k;
    uint32_t ci;
    if (!rp_sema_eval(s, a, &v, &k))
        return 0;
    if (!rp_prog_const(s->p, v, &ci)) {
        s->oom = 1;
        return 0;
    }
    *out = (rp_ins){(uint8_t)(k == K_INT    ? RPLAN_OP_ARGINT
                              : k == K_SIZE ? RPLAN_OP_ARGSIZE
                                            : RPLAN_OP_ARGDUR),
                    0, 0, 0, ci, 0};
    return 1;
}

/* run KERNEL(args): in a body, at most 16 arguments, each lowered after the call. */
static void lower_run(S *s, rp_node *n, const cx *c)
{
    if (c->kind != CX_BODY) {
        ERR(s, n->loc, "'run' is only allowed inside a body block");
        return;
    }
    size_t argc = n->a->num;
    if (argc > 16) {
        ERR(s, n->loc, "a kernel call takes at most 16 arguments");
        return;
    }
    uint32_t name;
    if (!rp_prog_str(s->p, n->text, strlen(n->text), &name)) {
        s->oom = 1;
        return;
    }
    rp_ins args[64];
    int ok = 1, i = 0;
    for (rp_node *a = n->a->a; a; a = a->next, i++) {
        if (!lower_arg(s, a, &args[i]))
            ok = 0;
        if (s->oom)
            return;
    }
    if (!ok)
        return;
    rp_sema_emit(s, RPLAN_OP_RUN, 0, 0, name, (uint32_t)argc, n->loc);
    i = 0;
    for (rp_node *a = n->a->a; a; a = a->next, i++)
        if (!rp_prog_emit(s->p, args[i], rp_sema_line_of(a->loc)))
            s->oom = 1;
}

/* for NAME in LO..HI (or LO..<HI): the body lowered once per value, within the unroll
 * and instruction limits of all loops together. */
static void lower_for(S *s, rp_node *n, cx *c)
{
    uint64_t lo, hi;
    int ok = rp_sema_eval_kind(s, n->a, K_INT, "a loop bound", &lo);
    if (!rp_sema_eval_kind(s, n->b, K_INT, "a loop bound", &hi))
        ok = 0;
    if (!ok || rp_sema_check_new_name(s, n->text, n->loc))
        return;
    if (s->nloops == (int)(sizeof s->loops / sizeof s->loops[0])) {
        ERR(s, n->loc, "loops are nested too deeply");
        return;
    }
    if (n->op == 1) { /* lo..<hi */
        if (hi <= lo)
            return;
        hi--;
    }
    if (hi < lo)
        return;
    if (hi - lo >= RP_MAX_UNROLLED) {
        if (hi - lo == UINT64_MAX)
            ERR(s, n->loc, "loop of 2^64 iterations is too long (at most %llu)",
                RP_MAX_UNROLLED);
        else
            ERR(s, n->loc, "loop of %" PRIu64 " iterations is too long (at most %llu)",
                hi - lo + 1, RP_MAX_UNROLLED);
        return;
    }
    s->loops[s->nloops++] = (loopvar){n->text, lo, n->loc};
    for (uint64_t i = lo; i <= hi && !s->oom && !s->too_big; i++) {
        size_t before = s->dc->nerrors;
        s->loops[s->nloops - 1].v = i;
        /* every loop together: the program a check must still prove in seconds */
        if (++s->unrolled > RP_MAX_UNROLLED || s->p->ncode > RP_MAX_INSTRS) {
            const loopvar *outer = &s->loops[0];
            ERR(s, outer->decl, "the loops here unroll to more than %s (at most %llu "
                "iterations and %u instructions in all)",
                s->unrolled > RP_MAX_UNROLLED ? "1000000 iterations" : "1000000 instructions",
                RP_MAX_UNROLLED, RP_MAX_INSTRS);
            s->too_big = 1;
            break;
        }
        rp_sema_lower_list(s, n->c, c);
        if (s->dc->nerrors != before || i == UINT64_MAX)
            break; /* report a mistake in a loop body once */
    }
    s->nloops--;
}

/* One statement, lowered by its kind (each checks the context it may appear in). */
static void lower_stmt(S *s, rp_node *n, cx *c)
{
    switch (n->kind) {
    case S_BUDGET:
    case S_CONST:
    case S_VALUE:
    case S_POLICY:
    case S_KERNEL: lower_decl(s, n, c); return;
    case S_STAGE: lower_scope(s, n, RPLAN_OP_STAGE, c); return;
    case S_PLAN: lower_scope(s, n, RPLAN_OP_PLAN, c); return;
    case S_REQUEST: lower_scope(s, n, RPLAN_OP_REQUEST, c); return;
    case S_PHASE: lower_phase(s, n, c); return;
    case S_RESERVE: lower_reserve(s, n, c); return;
    case S_REQUIRE:
        if (c->kind != CX_REQ) {
            ERR(s, n->loc, "'require' is only allowed inside a request");
            return;
        }
        if (c->phase != FHR_PHASE_NONE) {
            ERR(s, n->loc, "'require' after '%s'; a request lists require, then reserve, then "
                           "body", phase_word(c->phase));
            return;
        }
        vref_loc_op(s, n, RPLAN_OP_REQUIRE);
        return;
    case S_ENSURE:
    case S_MOVE:
    case S_DROP:
    case S_DISCARD: lower_action(s, n, c); return;
    case S_HOLD:
    case S_RELEASE:
        if (!in(c, CX_TOP, CX_STAGE, -1)) {
            ERR(s, n->loc, "'%s' is only allowed at the top level or inside a stage",
                n->kind == S_HOLD ? "hold" : "release");
            return;
        }
        vref_loc_op(s, n, n->kind == S_HOLD ? RPLAN_OP_HOLD : RPLAN_OP_RELEASE);
        return;
    case S_RUN: lower_run(s, n, c); return;
    case S_FOR: lower_for(s, n, c); return;
    default:
        ERR(s, n->loc, "internal error: unexpected node");
        return;
    }
}

void rp_sema_lower_list(S *s, rp_node *list, cx *c)
{
    if (!list)
        return;
    if (s->depth >= 100) {
        ERR(s, list->a ? list->a->loc : list->loc,
            "statements are nested too deeply (at most 100 levels)");
        return;
    }
    s->depth++;
    for (rp_node *n = list->a; n && !s->oom; n = n->next)
        lower_stmt(s, n, c);
    s->depth--;
}
