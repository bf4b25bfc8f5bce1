/* compiler/sema.c — the semantic pass: name resolution, integer/size/duration
 * expressions with overflow checks, the CKKS size functions, statement contexts and
 * phase order, loop unrolling and {name} interpolation, and lowering to bytecode. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lang.h"
#include "runtime/program/program.h"

enum { K_INT = 0, K_SIZE = 1, K_DUR = 2 };
enum { SYM_CONST, SYM_VALUE, SYM_POLICY };
enum { CX_TOP, CX_STAGE, CX_PLAN, CX_REQ, CX_ACTS, CX_BODY };

typedef struct sym {
    const char *name;
    int kind;
    rp_loc decl;
    uint64_t v;    /* const value */
    int vkind;     /* const kind */
    uint32_t first; /* value index or policy index */
    uint32_t dim;  /* 0: scalar */
    int is_array;
} sym;

typedef struct loopvar {
    const char *name;
    uint64_t v;
    rp_loc decl;
} loopvar;

typedef struct cx {
    int kind;
    fhr_phase phase; /* PLAN/REQ: the furthest phase seen */
    const char *what; /* "plan" or "request" */
} cx;

typedef struct S {
    rp_dctx *dc;
    rplan_program *p;
    sym *syms;
    size_t nsyms, capsyms;
    uint32_t *ht; /* sym index + 1 */
    size_t htcap;
    loopvar loops[32];
    int nloops;
    int has_budget[FHR_LOC_SLOTS];
    rp_loc budget_decl[FHR_LOC_SLOTS];
    uint64_t budget[FHR_LOC_SLOTS];
    int oom;
    int depth; /* expression and block nesting, bounded to protect the stack */
} S;

#define ERR(s, l, ...) rp_diag((s)->dc, RPLAN_ERROR, (l), __VA_ARGS__)
#define NOTE(s, l, ...) rp_diag((s)->dc, RPLAN_NOTE, (l), __VA_ARGS__)
/* Where the symbol y named `name` comes from (predefined symbols have no position). */
#define DECL_NOTE(s, y, name)                                                                \
    ((y)->decl.first_line ? NOTE(s, (y)->decl, "'%s' is declared here", name)              \
                          : NOTE(s, (y)->decl, "'%s' is predefined (rplan(5))", name))

static const char *const kind_name[] = {"an integer", "a size", "a duration"};

/* ---- symbols ------------------------------------------------------------------- */

static uint32_t hstr(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static sym *lookup(S *s, const char *name)
{
    if (!s->htcap)
        return NULL;
    size_t h = hstr(name) & (s->htcap - 1);
    while (s->ht[h]) {
        sym *y = &s->syms[s->ht[h] - 1];
        if (strcmp(y->name, name) == 0)
            return y;
        h = (h + 1) & (s->htcap - 1);
    }
    return NULL;
}

static loopvar *lookup_loop(S *s, const char *name)
{
    for (int i = s->nloops - 1; i >= 0; i--)
        if (strcmp(s->loops[i].name, name) == 0)
            return &s->loops[i];
    return NULL;
}

static sym *add_sym(S *s, const char *name, int kind, rp_loc decl)
{
    if ((s->nsyms + 1) * 2 > s->htcap) {
        size_t nc = s->htcap ? s->htcap * 2 : 64;
        uint32_t *t = calloc(nc, sizeof *t);
        if (!t) {
            s->oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < s->nsyms; i++) {
            size_t h = hstr(s->syms[i].name) & (nc - 1);
            while (t[h])
                h = (h + 1) & (nc - 1);
            t[h] = (uint32_t)i + 1;
        }
        free(s->ht);
        s->ht = t;
        s->htcap = nc;
    }
    if (s->nsyms == s->capsyms) {
        size_t nc = s->capsyms ? s->capsyms * 2 : 32;
        sym *v = realloc(s->syms, nc * sizeof *v);
        if (!v) {
            s->oom = 1;
            return NULL;
        }
        s->syms = v;
        s->capsyms = nc;
    }
    sym *y = &s->syms[s->nsyms];
    memset(y, 0, sizeof *y);
    y->name = name;
    y->kind = kind;
    y->decl = decl;
    size_t h = hstr(name) & (s->htcap - 1);
    while (s->ht[h])
        h = (h + 1) & (s->htcap - 1);
    s->ht[h] = (uint32_t)++s->nsyms;
    return y;
}

static const char *sym_kind_name(int k)
{
    return k == SYM_CONST ? "constant" : k == SYM_VALUE ? "value" : "policy";
}

/* Reports a duplicate; returns 1 if name is taken. */
static int check_new_name(S *s, const char *name, rp_loc at)
{
    sym *y = lookup(s, name);
    if (y && !y->decl.first_line) {
        ERR(s, at, "'%s' is predefined (the constants rank and world_size)", name);
        return 1;
    }
    if (y) {
        ERR(s, at, "'%s' is already declared", name);
        NOTE(s, y->decl, "previous declaration of '%s' is here", name);
        return 1;
    }
    loopvar *lv = lookup_loop(s, name);
    if (lv) {
        ERR(s, at, "'%s' is already declared", name);
        NOTE(s, lv->decl, "loop variable '%s' is declared here", name);
        return 1;
    }
    return 0;
}

/* The closest declared name of the given kind (-1: any kind, loop variables too). */
static const char *suggest_name(S *s, const char *word, int kind)
{
    size_t n = s->nsyms + (size_t)s->nloops;
    const char **c = malloc((n + 1) * sizeof *c);
    if (!c)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < s->nsyms; i++)
        if (kind < 0 || s->syms[i].kind == kind)
            c[k++] = s->syms[i].name;
    if (kind < 0 || kind == SYM_CONST)
        for (int i = 0; i < s->nloops; i++)
            c[k++] = s->loops[i].name;
    const char *r = rp_suggest(word, c, k);
    free(c);
    return r;
}

static void unknown_name(S *s, rp_loc at, const char *what, const char *name, int kind)
{
    const char *sug = suggest_name(s, name, kind);
    if (sug)
        ERR(s, at, "unknown %s '%s'; did you mean '%s'?", what, name, sug);
    else
        ERR(s, at, "unknown %s '%s'", what, name);
}

/* ---- expressions ------------------------------------------------------------------ */

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

static int eval(S *s, rp_node *e, uint64_t *v, int *kind);

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

static int eval_call(S *s, rp_node *e, uint64_t *v, int *kind)
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
    uint64_t a[3];
    int ka[3];
    int i = 0;
    for (rp_node *x = e->a->a; x; x = x->next, i++) {
        if (!eval(s, x, &a[i], &ka[i]))
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
    return ckks_call(s, e, f, a, v);
}

static int eval_bin(S *s, rp_node *e, uint64_t *v, int *kind)
{
    uint64_t a, b;
    int ka, kb;
    if (!eval(s, e->a, &a, &ka) || !eval(s, e->b, &b, &kb))
        return 0;
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
        if (__builtin_add_overflow(a, b, v))
            goto ovf;
        break;
    case '-':
        if (b > a) {
            ERR(s, e->loc, "negative result: %" PRIu64 " - %" PRIu64 " is below zero", a, b);
            return 0;
        }
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
        *v = e->op == '/' ? a / b : a % b;
        break;
    default:
        if (b >= 64 || (a >> (63 - b)) >> 1)
            goto ovf;
        *v = a << b;
        break;
    }
    *kind = k;
    return 1;
mismatch:
    ERR(s, e->loc, "cannot apply '%s' to %s and %s", opn, kind_name[ka], kind_name[kb]);
    return 0;
ovf:
    ERR(s, e->loc, "size overflow: the result of '%s' does not fit in 64 bits", opn);
    return 0;
}

static int eval1(S *s, rp_node *e, uint64_t *v, int *kind);

static int eval(S *s, rp_node *e, uint64_t *v, int *kind)
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

static int eval1(S *s, rp_node *e, uint64_t *v, int *kind)
{
    switch (e->kind) {
    case N_INT:
        *v = e->num;
        *kind = K_INT;
        return 1;
    case N_NAME: {
        loopvar *lv = lookup_loop(s, e->text);
        if (lv) {
            *v = lv->v;
            *kind = K_INT;
            return 1;
        }
        sym *y = lookup(s, e->text);
        if (!y) {
            unknown_name(s, e->loc, "name", e->text, -1);
            return 0;
        }
        if (y->kind != SYM_CONST) {
            ERR(s, e->loc, "'%s' is a %s, not a number", e->text, sym_kind_name(y->kind));
            DECL_NOTE(s, y, e->text);
            return 0;
        }
        *v = y->v;
        *kind = y->vkind;
        return 1;
    }
    case N_INDEX: {
        sym *y = lookup(s, e->text);
        ERR(s, e->loc, "'%s' cannot be indexed in an expression", e->text);
        if (y)
            DECL_NOTE(s, y, e->text);
        return 0;
    }
    case N_CALL:
        return eval_call(s, e, v, kind);
    case N_BIN:
        return eval_bin(s, e, v, kind);
    case N_NEG: {
        if (!eval(s, e->a, v, kind))
            return 0;
        if (*v != 0) {
            ERR(s, e->loc, "negative result: -%" PRIu64 " is below zero", *v);
            return 0;
        }
        return 1;
    }
    case N_UNIT: {
        const rp_unit *u = rp_unit_get(e->op);
        if (!u || !eval(s, e->a, v, kind))
            return 0;
        if (*kind != K_INT) {
            ERR(s, e->loc, "unit '%s' applied to %s (units apply to plain integers)", u->name,
                kind_name[*kind]);
            return 0;
        }
        if (__builtin_mul_overflow(*v, u->mult, v)) {
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

static int eval_kind(S *s, rp_node *e, int want, const char *what, uint64_t *v)
{
    int k;
    if (!eval(s, e, v, &k))
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

/* ---- locations, values, strings ------------------------------------------------------ */

static int resolve_loc(S *s, rp_node *n, uint8_t *slot)
{
    fhr_location l;
    if (n->op == 0)
        l = fhr_loc_host();
    else if (n->op == 1)
        l = fhr_loc_pinned();
    else if (fhr_loc_parse(n->text, &l) != FHR_OK) {
        if (strncmp(n->text, "cuda:", 5) == 0) {
            ERR(s, n->loc, "CUDA device index in '%s' is out of range (0 to %d)", n->text,
                FHR_MAX_CUDA_DEVICES - 1);
            return 0;
        }
        static const char *const cands[] = {"host", "pinned", "cuda"};
        char word[32];
        snprintf(word, sizeof word, "%.*s", (int)strcspn(n->text, ":"), n->text);
        const char *sug = rp_suggest(word, cands, 3);
        if (sug)
            ERR(s, n->loc, "unknown location '%s'; did you mean '%s%s'?", n->text, sug,
                strcmp(sug, "cuda") == 0 ? (strchr(n->text, ':') ? strchr(n->text, ':') : ":0")
                                         : "");
        else
            ERR(s, n->loc, "unknown location '%s' (locations are host, pinned and cuda:N)",
                n->text);
        return 0;
    }
    *slot = (uint8_t)fhr_loc_slot(l);
    return 1;
}

static const char *slot_name(uint8_t slot, char *buf, size_t cap)
{
    return fhr_loc_format(fhr_loc_from_slot(slot), buf, cap);
}

/* Resolves a value reference to a value index. */
static int resolve_value(S *s, rp_node *n, uint32_t *out)
{
    sym *y = lookup(s, n->text);
    if (!y || y->kind != SYM_VALUE) {
        if (!y && lookup_loop(s, n->text)) {
            ERR(s, n->loc, "'%s' is a loop variable, not a value", n->text);
            return 0;
        }
        if (y) {
            ERR(s, n->loc, "'%s' is a %s, not a value", n->text, sym_kind_name(y->kind));
            DECL_NOTE(s, y, n->text);
            return 0;
        }
        unknown_name(s, n->loc, "value", n->text, SYM_VALUE);
        return 0;
    }
    if (n->kind == N_NAME) {
        if (y->is_array) {
            ERR(s, n->loc, "'%s' is an array of %u values; name one as %s[INDEX]", n->text,
                y->dim, n->text);
            DECL_NOTE(s, y, n->text);
            return 0;
        }
        *out = y->first;
        return 1;
    }
    uint64_t idx;
    if (!eval_kind(s, n->a, K_INT, "an index", &idx))
        return 0;
    if (!y->is_array) {
        ERR(s, n->loc, "'%s' is not an array", n->text);
        DECL_NOTE(s, y, n->text);
        return 0;
    }
    if (idx >= y->dim) {
        ERR(s, n->loc, "index %" PRIu64 " is out of range for '%s' (%u values, 0 to %u)", idx,
            n->text, y->dim, y->dim - 1);
        DECL_NOTE(s, y, n->text);
        return 0;
    }
    *out = y->first + (uint32_t)idx;
    return 1;
}

/* Expands {name} in a string literal; the result goes to p's string table. */
static int interp(S *s, rp_node *n, uint32_t *out)
{
    char buf[1024];
    size_t len = 0;
    const char *t = n->text;
    while (*t) {
        if (*t == '{') {
            const char *e = strchr(t, '}');
            if (!e) {
                ERR(s, n->loc, "unterminated '{' in \"%s\"", n->text);
                return 0;
            }
            char name[64];
            size_t nl = (size_t)(e - t - 1);
            if (nl == 0 || nl >= sizeof name) {
                ERR(s, n->loc, "expected a name inside '{}' in \"%s\"", n->text);
                return 0;
            }
            memcpy(name, t + 1, nl);
            name[nl] = '\0';
            uint64_t v;
            loopvar *lv = lookup_loop(s, name);
            sym *y = lv ? NULL : lookup(s, name);
            if (lv)
                v = lv->v;
            else if (y && y->kind == SYM_CONST)
                v = y->v;
            else {
                const char *sug = suggest_name(s, name, SYM_CONST);
                if (sug)
                    ERR(s, n->loc, "unknown name '%s' in \"%s\"; did you mean '%s'?", name,
                        n->text, sug);
                else
                    ERR(s, n->loc, "unknown name '%s' in \"%s\"", name, n->text);
                return 0;
            }
            int w = snprintf(buf + len, sizeof buf - len, "%" PRIu64, v);
            if (w < 0 || (size_t)w >= sizeof buf - len)
                goto toolong;
            len += (size_t)w;
            t = e + 1;
            continue;
        }
        if (*t == '}') {
            ERR(s, n->loc, "unmatched '}' in \"%s\"", n->text);
            return 0;
        }
        if (len + 1 >= sizeof buf)
            goto toolong;
        buf[len++] = *t++;
    }
    if (!rp_prog_str(s->p, buf, len, out)) {
        s->oom = 1;
        return 0;
    }
    return 1;
toolong:
    ERR(s, n->loc, "name is longer than %zu bytes", sizeof buf - 1);
    return 0;
}

/* ---- emission -------------------------------------------------------------------- */

static rp_linerec line_of(rp_loc l)
{
    rp_linerec r;
    r.line = l.first_line;
    r.col = l.first_column > 0xFFFF ? 0xFFFF : (uint16_t)l.first_column;
    uint32_t len = l.last_line == l.first_line && l.last_column >= l.first_column
                       ? l.last_column - l.first_column + 1
                       : 1;
    r.len = len > 0xFFFF ? 0xFFFF : (uint16_t)len;
    return r;
}

static void emit(S *s, int op, uint8_t a, uint8_t b, uint32_t x, uint32_t y, rp_loc l)
{
    rp_ins in = {(uint8_t)op, a, b, 0, x, y};
    if (!rp_prog_emit(s->p, in, line_of(l)))
        s->oom = 1;
}

static rp_loc join(rp_loc a, rp_loc b)
{
    if (b.last_line == a.first_line) {
        a.last_line = b.last_line;
        a.last_column = b.last_column;
    }
    return a;
}

/* ---- declarations ------------------------------------------------------------------ */

static void decl_budget(S *s, rp_node *n)
{
    uint8_t slot;
    uint64_t v;
    int okl = resolve_loc(s, n->a, &slot);
    if (!eval_kind(s, n->b, K_SIZE, "a budget", &v) || !okl)
        return;
    if (s->has_budget[slot]) {
        char b[24];
        ERR(s, n->loc, "budget for %s is declared twice", slot_name(slot, b, sizeof b));
        NOTE(s, s->budget_decl[slot], "previous budget for %s is here", b);
        return;
    }
    s->has_budget[slot] = 1;
    s->budget_decl[slot] = n->loc;
    s->budget[slot] = v;
}

static void decl_const(S *s, rp_node *n)
{
    uint64_t v;
    int k;
    if (!eval(s, n->a, &v, &k))
        return;
    if (check_new_name(s, n->text, n->loc))
        return;
    sym *y = add_sym(s, n->text, SYM_CONST, n->loc);
    if (y) {
        y->v = v;
        y->vkind = k;
    }
}

static void decl_policy(S *s, rp_node *n)
{
    static const char *const kinds[] = {"tiered_lru", "lookahead"};
    uint32_t kind = strcmp(n->text2, "tiered_lru") == 0  ? RPLAN_POLICY_TIERED_LRU
                    : strcmp(n->text2, "lookahead") == 0 ? RPLAN_POLICY_LOOKAHEAD
                                                         : 0;
    if (!kind) {
        rp_loc l = n->a->loc;
        const char *sug = rp_suggest(n->text2, kinds, 2);
        if (sug)
            ERR(s, l, "unknown policy kind '%s'; did you mean '%s'?", n->text2, sug);
        else
            ERR(s, l, "unknown policy kind '%s' (the built-in kinds are tiered_lru and lookahead)",
                n->text2);
        return;
    }
    if (check_new_name(s, n->text, n->loc))
        return;
    rplan_program *p = s->p;
    rp_policyrec pr = {0, kind, p->nchains, 0};
    int ok = 1;
    uint8_t firsts[8];
    for (rp_node *ch = n->c->a; ch; ch = ch->next) {
        rp_chainrec cr;
        memset(cr.s, RP_NOLOC, sizeof cr.s);
        size_t k = 0;
        if (ch->a->num < 2) {
            ERR(s, ch->loc, "a fallback chain needs at least two locations (PREFERRED -> "
                            "FALLBACK)");
            ok = 0;
            continue;
        }
        if (ch->a->num > RP_MAX_CHAIN) {
            ERR(s, ch->loc, "a fallback chain has at most %d locations", RP_MAX_CHAIN);
            ok = 0;
            continue;
        }
        for (rp_node *l = ch->a->a; l; l = l->next) {
            uint8_t slot;
            if (!resolve_loc(s, l, &slot)) {
                ok = 0;
                break;
            }
            for (size_t j = 0; j < k; j++)
                if (cr.s[j] == slot) {
                    char b[24];
                    ERR(s, l->loc, "location %s appears twice in one fallback chain",
                        slot_name(slot, b, sizeof b));
                    ok = 0;
                }
            cr.s[k++] = slot;
        }
        if (!ok)
            continue;
        if (pr.n == 8) {
            ERR(s, ch->loc, "a policy has at most 8 fallback chains");
            ok = 0;
            break;
        }
        for (uint32_t j = 0; j < pr.n; j++)
            if (firsts[j] == cr.s[0]) {
                char b[24];
                ERR(s, ch->loc, "two fallback chains start at %s",
                    slot_name(cr.s[0], b, sizeof b));
                ok = 0;
            }
        firsts[pr.n] = cr.s[0];
        if (p->nchains == p->capchains) {
            uint32_t nc = p->capchains ? p->capchains * 2 : 8;
            rp_chainrec *v = realloc(p->chains, nc * sizeof *v);
            if (!v) {
                s->oom = 1;
                return;
            }
            p->chains = v;
            p->capchains = nc;
        }
        p->chains[p->nchains++] = cr;
        pr.n++;
    }
    if (!ok) {
        p->nchains = pr.first;
        return;
    }
    if (!rp_prog_str(p, n->text, strlen(n->text), &pr.name) ||
        (p->npols == p->cappols &&
         !(p->pols = realloc(p->pols, (p->cappols = p->cappols ? p->cappols * 2 : 8) *
                                          sizeof *p->pols)))) {
        s->oom = 1;
        return;
    }
    sym *y = add_sym(s, n->text, SYM_POLICY, n->loc);
    if (y)
        y->first = p->npols;
    p->pols[p->npols++] = pr;
}

static void decl_value(S *s, rp_node *n)
{
    rp_node *mode = NULL, *at = NULL, *init = NULL, *src = NULL, *prio = NULL;
    int ok = 1;
    for (rp_node *a = n->c->a; a; a = a->next) {
        rp_node **slot = a->kind == A_MODE ? &mode : a->kind == A_AT ? &at
                       : a->kind == A_INIT ? &init : a->kind == A_SOURCE ? &src : &prio;
        static const char *const an[] = {"replica mode", "at", "init", "source", "priority"};
        if (*slot) {
            ERR(s, a->loc, "duplicate %s%s%s for value '%s'", a->kind == A_MODE ? "" : "'",
                an[a->kind - A_MODE], a->kind == A_MODE ? "" : "'", n->text);
            NOTE(s, (*slot)->loc, "first given here");
            ok = 0;
        }
        *slot = a;
    }
    if (src && at) {
        ERR(s, src->loc, "value '%s' has both 'at' and 'source': a value is either adopted "
                         "at a location or reconstructed from a source", n->text);
        ok = 0;
    } else if (!src && !at) {
        ERR(s, n->loc, "value '%s' needs an initial location ('at LOC') or a source "
                       "('source synth(SEED)' or 'source file(PATH)')", n->text);
        ok = 0;
    }
    if (init && !at && !src) {
        /* reported above */
    } else if (init && src) {
        ERR(s, init->loc, "'init' gives the data of an adopted value; value '%s' has a "
                          "source instead", n->text);
        ok = 0;
    }
    if (src && src->a->kind == N_NAME) {
        ERR(s, src->a->loc, "'zero' cannot reconstruct a value; use synth(SEED) or "
                            "file(PATH)");
        ok = 0;
    }
    uint64_t dim = 0;
    if (n->a) {
        if (!eval_kind(s, n->a, K_INT, "an array size", &dim))
            ok = 0;
        else if (dim == 0 || dim > 1000000) {
            ERR(s, n->a->loc, "array size must be from 1 to 1000000, not %" PRIu64, dim);
            ok = 0;
        }
    }
    uint8_t slot = RP_NOLOC;
    if (at && !resolve_loc(s, at->a, &slot))
        ok = 0;
    int64_t priority = 0;
    if (prio) {
        uint64_t pv;
        if (!eval_kind(s, prio->a, K_INT, "a priority", &pv))
            ok = 0;
        else if (pv > INT32_MAX) {
            ERR(s, prio->a->loc, "priority must be from 0 to 2147483647");
            ok = 0;
        } else
            priority = (int64_t)pv;
    }
    if (check_new_name(s, n->text, n->loc) || !ok)
        return;
    rplan_program *p = s->p;
    uint64_t count = n->a ? dim : 1;
    if (p->nvals + count > 1000000) {
        ERR(s, n->loc, "too many values (at most 1000000)");
        return;
    }
    rp_node *data = src ? src->a : init ? init->a : NULL;
    uint32_t path = 0;
    if (data && data->kind == N_FILE) {
        if (!data->text[0]) {
            ERR(s, data->loc, "file() needs a path");
            return;
        }
        if (!rp_prog_str(p, data->text, strlen(data->text), &path)) {
            s->oom = 1;
            return;
        }
    }
    uint32_t first = p->nvals;
    int pushed = 0;
    if (n->a) {
        if (s->nloops == (int)(sizeof s->loops / sizeof s->loops[0])) {
            ERR(s, n->loc, "loops are nested too deeply");
            return;
        }
        s->loops[s->nloops++] = (loopvar){"i", 0, n->loc};
        pushed = 1;
    }
    for (uint64_t e = 0; e < count; e++) {
        if (pushed)
            s->loops[s->nloops - 1].v = e;
        uint64_t size;
        if (!eval_kind(s, n->b, K_SIZE, "a value size", &size))
            goto fail;
        if (size == 0) {
            ERR(s, n->b->loc, "a value size must not be zero");
            goto fail;
        }
        rp_value v;
        memset(&v, 0, sizeof v);
        char nm[128];
        if (n->a)
            snprintf(nm, sizeof nm, "%s[%" PRIu64 "]", n->text, e);
        else
            snprintf(nm, sizeof nm, "%s", n->text);
        if (!rp_prog_str(p, nm, strlen(nm), &v.name)) {
            s->oom = 1;
            goto fail;
        }
        v.mode = mode && mode->op == FHR_EXCLUSIVE;
        v.recov = src != NULL;
        v.init_slot = slot;
        v.nbytes = size;
        v.prio = (int32_t)priority;
        v.data = RPLAN_DATA_ZERO;
        if (data && data->kind == N_SYNTH) {
            v.data = RPLAN_DATA_SYNTH;
            if (!eval_kind(s, data->a, K_INT, "a seed", &v.arg))
                goto fail;
        } else if (data && data->kind == N_FILE) {
            v.data = RPLAN_DATA_FILE;
            v.arg = path;
        }
        rp_linerec ln = line_of(n->loc);
        v.line = ln.line;
        v.col = ln.col;
        v.len = ln.len;
        if (p->nvals == p->capvals) {
            uint32_t nc = p->capvals ? p->capvals * 2 : 16;
            rp_value *nv = realloc(p->vals, nc * sizeof *nv);
            if (!nv) {
                s->oom = 1;
                goto fail;
            }
            p->vals = nv;
            p->capvals = nc;
        }
        p->vals[p->nvals++] = v;
    }
    if (pushed)
        s->nloops--;
    sym *y = add_sym(s, n->text, SYM_VALUE, n->loc);
    if (y) {
        y->first = first;
        y->dim = (uint32_t)dim;
        y->is_array = n->a != NULL;
    }
    return;
fail:
    if (pushed)
        s->nloops--;
    p->nvals = first;
}

/* ---- statements -------------------------------------------------------------------- */

static void lower_list(S *s, rp_node *list, cx *c);

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

static void vref_loc_op(S *s, rp_node *n, int op)
{
    uint32_t v;
    uint8_t slot = 0;
    int ok = resolve_value(s, n->a, &v);
    if (n->b && !resolve_loc(s, n->b, &slot))
        ok = 0;
    if (ok)
        emit(s, op, slot, 0, v, 0, n->loc);
}

static void lower_scope(S *s, rp_node *n, int op, cx *c)
{
    uint32_t name;
    if (!in(c, CX_TOP, CX_STAGE, -1)) {
        ERR(s, n->loc, "'%s' is only allowed at the top level or inside a stage",
            op == RPLAN_OP_STAGE ? "stage" : op == RPLAN_OP_PLAN ? "plan" : "request");
        return;
    }
    int ok = interp(s, n->a, &name);
    uint32_t pol = 0;
    if (op == RPLAN_OP_REQUEST) {
        sym *y = lookup(s, n->b->text);
        if (!y || y->kind != SYM_POLICY) {
            if (y) {
                ERR(s, n->b->loc, "'%s' is a %s, not a policy", n->b->text,
                    sym_kind_name(y->kind));
                DECL_NOTE(s, y, n->b->text);
            } else {
                unknown_name(s, n->b->loc, "policy", n->b->text, SYM_POLICY);
            }
            ok = 0;
        } else {
            pol = y->first;
        }
    }
    if (!ok)
        return;
    rp_loc at = join(n->loc, n->a->loc);
    emit(s, op, 0, 0, name, pol, at);
    cx inner = {op == RPLAN_OP_STAGE  ? CX_STAGE
                : op == RPLAN_OP_PLAN ? CX_PLAN
                                      : CX_REQ,
                FHR_PHASE_NONE, op == RPLAN_OP_PLAN ? "plan" : "request"};
    rp_node *body = op == RPLAN_OP_REQUEST ? n->c : n->b;
    lower_list(s, body, &inner);
    emit(s, op == RPLAN_OP_STAGE ? RPLAN_OP_ENDSTAGE : RPLAN_OP_END, 0, 0, 0, 0,
         n->end.first_line ? n->end : at);
}

static const char *ctx_hint_action =
    "actions go at the top level, in a stage, or in a plan's reclaim, enter or exit block";

static void lower_stmt(S *s, rp_node *n, cx *c)
{
    switch (n->kind) {
    case S_BUDGET:
    case S_CONST:
    case S_VALUE:
    case S_POLICY: {
        static const char *const w[] = {"budget", "const", "value", "policy"};
        const char *word = w[n->kind - S_BUDGET];
        if (c->kind != CX_TOP) {
            ERR(s, n->loc, "'%s' declarations are only allowed at the top level", word);
            return;
        }
        if (n->kind == S_BUDGET)
            decl_budget(s, n);
        else if (n->kind == S_CONST)
            decl_const(s, n);
        else if (n->kind == S_VALUE)
            decl_value(s, n);
        else
            decl_policy(s, n);
        return;
    }
    case S_STAGE: lower_scope(s, n, RPLAN_OP_STAGE, c); return;
    case S_PLAN: lower_scope(s, n, RPLAN_OP_PLAN, c); return;
    case S_REQUEST: lower_scope(s, n, RPLAN_OP_REQUEST, c); return;
    case S_PHASE: {
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
        emit(s, RPLAN_OP_PHASE, (uint8_t)ph, 0, 0, 0, n->loc);
        cx inner = {ph == FHR_PHASE_BODY ? CX_BODY : CX_ACTS, ph, c->what};
        lower_list(s, n->a, &inner);
        return;
    }
    case S_RESERVE: {
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
        int ok = resolve_loc(s, n->a, &slot);
        if (!eval_kind(s, n->b, K_SIZE, "a reservation", &v))
            ok = 0;
        if (n->c && !interp(s, n->c, &label))
            ok = 0;
        if (!ok)
            return;
        if (!rp_prog_const(s->p, v, &k)) {
            s->oom = 1;
            return;
        }
        emit(s, RPLAN_OP_RESERVE, slot, 0, k, label, n->loc);
        return;
    }
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
    case S_DISCARD: {
        static const char *const w[] = {"ensure", "move", "drop", "discard"};
        static const int ops[] = {RPLAN_OP_ENSURE, RPLAN_OP_MOVE, RPLAN_OP_DROP,
                                  RPLAN_OP_DISCARD};
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
        int ok = resolve_value(s, n->a, &v);
        if (!resolve_loc(s, n->b, &to))
            ok = 0;
        if (n->c && !resolve_loc(s, n->c, &from))
            ok = 0;
        if (ok && from == to) {
            ERR(s, n->c->loc, "move from and to the same location");
            ok = 0;
        }
        if (ok)
            emit(s, RPLAN_OP_MOVE, to, from, v, 0, n->loc);
        return;
    }
    case S_HOLD:
    case S_RELEASE:
        if (!in(c, CX_TOP, CX_STAGE, -1)) {
            ERR(s, n->loc, "'%s' is only allowed at the top level or inside a stage",
                n->kind == S_HOLD ? "hold" : "release");
            return;
        }
        vref_loc_op(s, n, n->kind == S_HOLD ? RPLAN_OP_HOLD : RPLAN_OP_RELEASE);
        return;
    case S_RUN: {
        if (c->kind != CX_BODY) {
            ERR(s, n->loc, "'run' is only allowed inside a body block");
            return;
        }
        size_t argc = n->a->num;
        if (argc > 64) {
            ERR(s, n->loc, "a kernel call takes at most 64 arguments");
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
            sym *y = (a->kind == N_NAME || a->kind == N_INDEX) && !lookup_loop(s, a->text)
                         ? lookup(s, a->text)
                         : NULL;
            if (y && y->kind == SYM_VALUE) {
                uint32_t v;
                if (!resolve_value(s, a, &v)) {
                    ok = 0;
                    continue;
                }
                args[i] = (rp_ins){RPLAN_OP_ARGVAL, 0, 0, 0, v, 0};
                continue;
            }
            uint64_t v;
            int k;
            uint32_t ci;
            if (!eval(s, a, &v, &k)) {
                ok = 0;
                continue;
            }
            if (!rp_prog_const(s->p, v, &ci)) {
                s->oom = 1;
                return;
            }
            args[i] = (rp_ins){(uint8_t)(k == K_INT    ? RPLAN_OP_ARGINT
                                         : k == K_SIZE ? RPLAN_OP_ARGSIZE
                                                       : RPLAN_OP_ARGDUR),
                               0, 0, 0, ci, 0};
        }
        if (!ok)
            return;
        emit(s, RPLAN_OP_RUN, 0, 0, name, (uint32_t)argc, n->loc);
        i = 0;
        for (rp_node *a = n->a->a; a; a = a->next, i++)
            if (!rp_prog_emit(s->p, args[i], line_of(a->loc)))
                s->oom = 1;
        return;
    }
    case S_FOR: {
        uint64_t lo, hi;
        int ok = eval_kind(s, n->a, K_INT, "a loop bound", &lo);
        if (!eval_kind(s, n->b, K_INT, "a loop bound", &hi))
            ok = 0;
        if (!ok || check_new_name(s, n->text, n->loc))
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
        if (hi >= lo && hi - lo >= 10000000) {
            ERR(s, n->loc, "loop of %" PRIu64 " iterations is too long (at most 10000000)",
                hi - lo + 1);
            return;
        }
        s->loops[s->nloops++] = (loopvar){n->text, lo, n->loc};
        for (uint64_t i = lo; i <= hi && !s->oom; i++) {
            size_t before = s->dc->nerrors;
            s->loops[s->nloops - 1].v = i;
            lower_list(s, n->c, c);
            if (s->dc->nerrors != before || i == UINT64_MAX)
                break; /* report a mistake in a loop body once */
        }
        s->nloops--;
        return;
    }
    default:
        ERR(s, n->loc, "internal error: unexpected node");
        return;
    }
}

static void lower_list(S *s, rp_node *list, cx *c)
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

size_t rp_sema(rp_node *root, rp_dctx *dc, const rplan_compile_opts *opts, rplan_program *p)
{
    S s;
    memset(&s, 0, sizeof s);
    s.dc = dc;
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
        sym *y = add_sym(&s, predef[i], SYM_CONST, (rp_loc){0, 0, 0, 0});
        if (y) {
            y->v = i ? world : rank;
            y->vkind = K_INT;
        }
    }
    if (dc->nerrors == before)
        lower_list(&s, root, &top);
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
        p->buds[p->nbuds++] = (rp_budgetrec){(uint8_t)slot, s.budget[slot]};
    }
    if (s.oom)
        ERR(&s, ((rp_loc){0, 0, 0, 0}), "out of memory");
    free(s.syms);
    free(s.ht);
    return dc->nerrors - before;
}
