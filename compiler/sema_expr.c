/* compiler/sema_expr.c — constant expressions: integer/size/duration kinds, units,
 * overflow-checked arithmetic, min/max and the calls to the CKKS size functions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/sema.h"

static const char *const kind_name[] = {"an integer", "a size", "a duration"};

static const char *const funcs[] = {
    "ciphertext",         "plaintext",     "switching_key",     "keyswitch_workspace",
    "rotation_workspace", "mult_workspace", "rescale_workspace", "min",
    "max",
};
static const int func_arity[] = {2, 2, 3, 3, 3, 3, 2, 2, 2};
static const char *const func_sig[] = {
    "(N, level)", "(N, level)", "(N, level, dnum)", "(N, level, dnum)", "(N, level, dnum)",
    "(N, level, dnum)", "(N, level)", "(a, b)", "(a, b)",
};

static int ckks_call(S *s, rp_node *e, int f, const uint64_t *a, uint64_t *v)
{
    uint64_t n = a[0], l = a[1], dnum = f == 0 || f == 1 || f == 6 ? 1 : a[2];
    const char *fn = funcs[f];
    if (n < 1024 || n > 131072 || (n & (n - 1))) {
        ERR(s, e->loc, "%s(): N must be a power of two from 1024 to 131072, not %" PRIu64,
            fn, n);
        return 0;
    }
    if (l > 100) {
        ERR(s, e->loc, "%s(): level must be at most 100, not %" PRIu64, fn, l);
        return 0;
    }
    if (dnum == 0 || dnum > l + 1) {
        ERR(s, e->loc, "%s(): dnum must be from 1 to level+1 (%" PRIu64 "), not %" PRIu64, fn,
            l + 1, dnum);
        return 0;
    }
    uint64_t ct, ks = 0, t;
    rplan_ckks_ciphertext(n, l, &ct);
    if (f >= 2 && f <= 5 && rplan_ckks_keyswitch_workspace(n, l, dnum, &ks) != FHR_OK)
        goto ovf;
    switch (f) {
    case 0: *v = ct; break;
    case 1: rplan_ckks_plaintext(n, l, v); break;
    case 2:
        if (rplan_ckks_switching_key(n, l, dnum, v) != FHR_OK)
            goto ovf;
        break;
    case 3: *v = ks; break;
    case 4: /* key switching plus the rotated output ciphertext */
        if (__builtin_add_overflow(ks, ct, v))
            goto ovf;
        break;
    case 5: /* the degree-2 tensor (3 polynomials) plus relinearization's key switching */
        rplan_ckks_plaintext(n, l, &t);
        if (__builtin_mul_overflow(t, 3, &t) || __builtin_add_overflow(t, ks, v))
            goto ovf;
        break;
    case 6: /* the dropped limb of both polynomials in coefficient form */
        *v = 2 * n * 8;
        break;
    }
    return 1;
ovf:
    ERR(s, e->loc, "size overflow in %s()", fn);
    return 0;
}

#define RP_INT_MAX ((rp_int)UINT64_MAX)

const char *rp_int_str(rp_int v, char *buf, size_t cap)
{
    uint64_t m = v < 0 ? (uint64_t)-v : (uint64_t)v;
    snprintf(buf, cap, "%s%" PRIu64, v < 0 ? "-" : "", m);
    return buf;
}

static int eval_call(S *s, rp_node *e, rp_int *v, int *kind)
{
    int f = -1;
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
        if (strcmp(funcs[i], e->text) == 0)
            f = (int)i;
    if (f < 0) {
        const char *sug = rp_suggest(e->text, funcs, sizeof funcs / sizeof funcs[0]);
        if (sug)
            ERR(s, e->loc, "unknown function '%s'; did you mean '%s'?", e->text, sug);
        else
            ERR(s, e->loc, "unknown function '%s'", e->text);
        return 0;
    }
    size_t nargs = e->a ? e->a->num : 0;
    if (nargs != (size_t)func_arity[f]) {
        ERR(s, e->loc, "%s%s takes %d arguments, not %zu", funcs[f], func_sig[f],
            func_arity[f], nargs);
        return 0;
    }
    rp_int a[3];
    uint64_t ua[3];
    int ka[3];
    int i = 0;
    for (rp_node *x = e->a->a; x; x = x->next, i++) {
        if (f < 7 ? !rp_sema_eval(s, x, &ua[i], &ka[i]) : !rp_sema_eval_signed(s, x, &a[i], &ka[i]))
            return 0;
        if (f < 7 && ka[i] != K_INT) {
            ERR(s, x->loc, "%s(): argument %d must be an integer, not %s", funcs[f], i + 1,
                kind_name[ka[i]]);
            return 0;
        }
    }
    if (f >= 7) {
        if (ka[0] != ka[1]) {
            ERR(s, e->loc, "%s(): arguments must have the same kind (%s and %s)", funcs[f],
                kind_name[ka[0]], kind_name[ka[1]]);
            return 0;
        }
        *kind = ka[0];
        *v = (f == 7) == (a[0] < a[1]) ? a[0] : a[1];
        return 1;
    }
    *kind = K_SIZE;
    uint64_t r;
    if (!ckks_call(s, e, f, ua, &r))
        return 0;
    *v = r;
    return 1;
}

/* e's operator on a (of kind ka) and b (kb). */
static int apply_bin(S *s, rp_node *e, rp_int a, int ka, rp_int b, int kb, rp_int *v,
                     int *kind)
{
    const char *opn = e->op == '+' ? "+" : e->op == '-' ? "-" : e->op == '*' ? "*"
                    : e->op == '/' ? "/" : e->op == '%' ? "%" : "<<";
    int k;
    switch (e->op) {
    case '+':
    case '-':
        if (ka != kb)
            goto mismatch;
        k = ka;
        break;
    case '*':
        if (ka != K_INT && kb != K_INT)
            goto mismatch;
        k = ka != K_INT ? ka : kb;
        break;
    case '/':
        if (kb != K_INT && ka != kb)
            goto mismatch;
        k = kb == K_INT ? ka : K_INT;
        break;
    default: /* % and << */
        if (kb != K_INT)
            goto mismatch;
        k = ka;
        break;
    }
    switch (e->op) {
    case '+':
        *v = a + b; /* magnitudes below 2^64: no overflow of 128 bits */
        break;
    case '-':
        *v = a - b;
        break;
    case '*':
        if (__builtin_mul_overflow(a, b, v))
            goto ovf;
        break;
    case '/':
    case '%':
        if (b == 0) {
            ERR(s, e->loc, "division by zero");
            return 0;
        }
        *v = e->op == '/' ? a / b : a % b; /* truncated toward zero, as in C */
        break;
    default:
        if (b < 0 || b >= 64)
            goto ovf;
        if (__builtin_mul_overflow(a, (rp_int)1 << (int)b, v))
            goto ovf;
        break;
    }
    if (*v > RP_INT_MAX || *v < -RP_INT_MAX)
        goto ovf;
    *kind = k;
    return 1;
mismatch:
    ERR(s, e->loc, "cannot apply '%s' to %s and %s", opn, kind_name[ka], kind_name[kb]);
    return 0;
ovf:
    ERR(s, e->loc, "size overflow: the result of '%s' does not fit in 64 bits", opn);
    return 0;
}

/* A left-leaning chain (1 + 2 + ... + n, the parser's shape for a flat sum) is evaluated
 * along its spine without recursion, so only real nesting (parentheses, right operands)
 * counts against the depth limit. */
static int eval_bin(S *s, rp_node *e, rp_int *v, int *kind)
{
    size_t n = 0;
    for (rp_node *x = e; x->kind == N_BIN; x = x->a)
        n++;
    rp_node **spine = malloc(n * sizeof *spine);
    if (!spine) {
        s->oom = 1;
        return 0;
    }
    n = 0;
    for (rp_node *x = e; x->kind == N_BIN; x = x->a)
        spine[n++] = x;
    rp_int a, b;
    int ka, kb, ok = rp_sema_eval_signed(s, spine[n - 1]->a, &a, &ka);
    for (size_t i = n; ok && i-- > 0;)
        ok = rp_sema_eval_signed(s, spine[i]->b, &b, &kb) &&
             apply_bin(s, spine[i], a, ka, b, kb, &a, &ka);
    free(spine);
    if (ok) {
        *v = a;
        *kind = ka;
    }
    return ok;
}

static int eval1(S *s, rp_node *e, rp_int *v, int *kind);

int rp_sema_eval(S *s, rp_node *e, uint64_t *v, int *kind)
{
    rp_int r;
    if (!rp_sema_eval_signed(s, e, &r, kind))
        return 0;
    if (r < 0) {
        char b[32];
        ERR(s, e->loc, "negative result: %s is below zero (only constants and priorities may "
            "be negative)", rp_int_str(r, b, sizeof b));
        return 0;
    }
    *v = (uint64_t)r;
    return 1;
}

int rp_sema_eval_signed(S *s, rp_node *e, rp_int *v, int *kind)
{
    if (s->depth >= 200) {
        ERR(s, e->loc, "expression is nested too deeply (at most 200 levels)");
        return 0;
    }
    s->depth++;
    int r = eval1(s, e, v, kind);
    s->depth--;
    return r;
}

static int eval1(S *s, rp_node *e, rp_int *v, int *kind)
{
    switch (e->kind) {
    case N_INT:
        *v = e->num;
        *kind = K_INT;
        return 1;
    case N_NAME: {
        loopvar *lv = rp_sema_lookup_loop(s, e->text);
        if (lv) {
            *v = lv->v;
            *kind = K_INT;
            return 1;
        }
        sym *y = rp_sema_lookup(s, e->text);
        if (!y) {
            rp_sema_unknown_expr_name(s, e->loc, e->text);
            return 0;
        }
        y->used = 1;
        if (y->kind != SYM_CONST) {
            ERR(s, e->loc, "'%s' is a %s, not a number", e->text, rp_sema_sym_kind_name(y->kind));
            DECL_NOTE(s, y, e->text);
            return 0;
        }
        *v = y->v;
        *kind = y->vkind;
        return 1;
    }
    case N_INDEX: {
        sym *y = rp_sema_lookup(s, e->text);
        ERR(s, e->loc, "'%s' cannot be indexed in an expression", e->text);
        if (y)
            DECL_NOTE(s, y, e->text);
        return 0;
    }
    case N_CALL:
        return eval_call(s, e, v, kind);
    case N_BIN:
        return eval_bin(s, e, v, kind);
    case N_NEG:
        if (!rp_sema_eval_signed(s, e->a, v, kind))
            return 0;
        *v = -*v;
        return 1;
    case N_UNIT: {
        const rp_unit *u = rp_unit_get(e->op);
        if (!u || !rp_sema_eval_signed(s, e->a, v, kind))
            return 0;
        if (*kind != K_INT) {
            ERR(s, e->loc, "unit '%s' applied to %s (units apply to plain integers)", u->name,
                kind_name[*kind]);
            return 0;
        }
        if (__builtin_mul_overflow(*v, (rp_int)u->mult, v) || *v > RP_INT_MAX ||
            *v < -RP_INT_MAX) {
            ERR(s, e->loc, "size overflow: the value in '%s' does not fit in 64 bits", u->name);
            return 0;
        }
        *kind = u->kind == RP_UK_SIZE ? K_SIZE : K_DUR;
        return 1;
    }
    default:
        ERR(s, e->loc, "expected an expression");
        return 0;
    }
}

int rp_sema_eval_kind(S *s, rp_node *e, int want, const char *what, uint64_t *v)
{
    int k;
    if (!rp_sema_eval(s, e, v, &k))
        return 0;
    if (k != want) {
        if (want == K_SIZE && k == K_INT)
            ERR(s, e->loc, "%s needs a unit (B, KiB, MiB, GiB or TiB): %" PRIu64 " is a plain "
                "integer", what, *v);
        else
            ERR(s, e->loc, "%s must be %s, not %s", what, kind_name[want], kind_name[k]);
        return 0;
    }
    return 1;
}
