/* compiler/sema_names.c — the semantic pass's names: the symbol table of constants,
 * values and policies, loop variables, redeclaration checks and "did you mean" lookups. */
#include <stdlib.h>
#include <string.h>

#include "compiler/sema.h"

static uint32_t hstr(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

sym *rp_sema_lookup(S *s, const char *name)
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

loopvar *rp_sema_lookup_loop(S *s, const char *name)
{
    for (int i = s->nloops - 1; i >= 0; i--)
        if (strcmp(s->loops[i].name, name) == 0)
            return &s->loops[i];
    return NULL;
}

sym *rp_sema_add_sym(S *s, const char *name, int kind, rp_loc decl)
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

const char *rp_sema_sym_kind_name(int k)
{
    return k == SYM_CONST ? "constant" : k == SYM_VALUE ? "value" : "policy";
}

/* Reports a duplicate; returns 1 if name is taken. */
int rp_sema_check_new_name(S *s, const char *name, rp_loc at)
{
    sym *y = rp_sema_lookup(s, name);
    if (y && !y->decl.first_line) {
        ERR(s, at, "'%s' is predefined (the constants rank and world_size)", name);
        return 1;
    }
    if (y) {
        ERR(s, at, "'%s' is already declared", name);
        NOTE(s, y->decl, "previous declaration of '%s' is here", name);
        return 1;
    }
    loopvar *lv = rp_sema_lookup_loop(s, name);
    if (lv) {
        ERR(s, at, "'%s' is already declared", name);
        NOTE(s, lv->decl, "loop variable '%s' is declared here", name);
        return 1;
    }
    return 0;
}

/* The closest declared name of the given kind (-1: any kind, loop variables too). */
const char *rp_sema_suggest_name(S *s, const char *word, int kind)
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

void rp_sema_mark_broken(S *s, const char *name, const char *cause, rp_loc decl)
{
    if (!name || s->nbroken >= (int)(sizeof s->broken / sizeof s->broken[0]))
        return;
    s->broken[s->nbroken].name = name;
    s->broken[s->nbroken].cause = cause;
    s->broken[s->nbroken].decl = decl;
    s->broken[s->nbroken++].cycle = s->cycle_reported;
}

static int is_broken(const S *s, const char *name)
{
    for (int i = 0; i < s->nbroken; i++)
        if (!strcmp(s->broken[i].name, name))
            return 1;
    return 0;
}

/* 1 when expression e names `name` (depth-bounded like the evaluator). */
static int mentions(const rp_node *e, const char *name, int depth)
{
    for (; e && depth < 200; e = e->next) {
        if ((e->kind == N_NAME || e->kind == N_INDEX) && e->text && !strcmp(e->text, name))
            return 1;
        if (mentions(e->a, name, depth + 1) || mentions(e->b, name, depth + 1) ||
            mentions(e->c, name, depth + 1))
            return 1;
    }
    return 0;
}

void rp_sema_unknown_name(S *s, rp_loc at, const char *what, const char *name, int kind)
{
    if (is_broken(s, name))
        return; /* its declaration failed, and said so */
    const char *sug = rp_sema_suggest_name(s, name, kind);
    if (sug)
        ERR(s, at, "unknown %s '%s'; did you mean '%s'?", what, name, sug);
    else
        ERR(s, at, "unknown %s '%s'", what, name);
}

void rp_sema_unknown_expr_name(S *s, rp_loc at, const char *name)
{
    if (s->defining && !s->cause)
        s->cause = name;
    for (int i = 0; i < s->nbroken; i++) {
        if (strcmp(s->broken[i].name, name) != 0)
            continue;
        if (s->defining && s->broken[i].cause && !strcmp(s->broken[i].cause, s->defining) &&
            !s->broken[i].cycle) {
            ERR(s, at, "constants '%s' and '%s' are defined in terms of each other (a cycle)",
                s->defining, name);
            NOTE(s, s->broken[i].decl, "'%s' is declared here", name);
        }
        /* else: its own definition was reported already */
        return;
    }
    for (rp_node *n = s->root ? s->root->a : NULL; n; n = n->next)
        if (n->kind == S_CONST && n->text && !strcmp(n->text, name) &&
            (n->loc.first_line > at.first_line ||
             (n->loc.first_line == at.first_line && n->loc.first_column > at.first_column))) {
            if (s->defining && mentions(n->a, s->defining, 0)) {
                /* one error for the cycle, here; the later constant says nothing more */
                ERR(s, at, "constants '%s' and '%s' are defined in terms of each other (a "
                    "cycle)", s->defining, name);
                s->cycle_reported = 1;
            } else
                ERR(s, at, "'%s' is used before its declaration (constants are declared "
                    "before they are used)", name);
            NOTE(s, n->loc, "'%s' is declared here", name);
            return;
        }
    rp_sema_unknown_name(s, at, "name", name, -1);
}
