/* compiler/format.c — rplan_format: the one canonical layout of a plan file (fheplan fmt),
 * built on the lexer's tokens with comments kept; the layout rules are in rplan(5), FORMAT. */
#include <stdlib.h>
#include <string.h>

#include "compiler/lang.h"
#include "compiler/out.h"
#include "parser.h"

#define FMT_WIDTH 100   /* longest line the formatter writes (comments are not wrapped) */
#define FMT_INDENT 2    /* spaces per block level */
#define FMT_CONT 4      /* extra spaces on a wrapped statement's continuation lines */
#define FMT_MAX_DEPTH 200

typedef struct ftok {
    int k;
    const char *s;
    size_t n;
    uint32_t line;
} ftok;

/* A statement (header tokens, maybe a block of items) or an own-line comment. */
typedef struct fitem {
    int comment;           /* token index of an own-line comment, or -1 */
    size_t h0, h1;         /* header tokens [h0, h1), up to the block's '{' */
    int block;             /* has a block */
    int one_line_src;      /* its '{' and '}' are on one source line */
    int open_trail, trail; /* comments after '{' and after the statement, or -1 */
    int blank;             /* a blank line before it in the source */
    struct fitem *kids;
    size_t nkids, capkids;
} fitem;

/* One output line; value declarations keep their columns apart for alignment. */
typedef struct oline {
    size_t indent;
    char *code;     /* without the indent; "" for a comment-only line */
    char *cells[4]; /* value declaration: name, "= size", first attribute, the rest */
    int ncells;
    char *comment;  /* trailing (or own-line) comment text, or NULL */
    int blank;      /* an empty line before it */
} oline;

typedef struct fmt {
    ftok *t;
    size_t nt, capt;
    oline *l;
    size_t nl, capl;
    int nomem, deep;
} fmt;

static int is_stmt_start(int k)
{
    switch (k) {
    case T_RPLAN: case T_BUDGET: case T_CONST: case T_VALUE: case T_POLICY: case T_STAGE:
    case T_PLAN: case T_REQUEST: case T_RECLAIM: case T_ENTER: case T_BODY: case T_EXIT:
    case T_RESERVE: case T_REQUIRE: case T_ENSURE: case T_MOVE: case T_DROP: case T_DISCARD:
    case T_HOLD: case T_RELEASE: case T_RUN: case T_FOR: case T_KERNEL:
        return 1;
    default:
        return 0;
    }
}

static int is_attr(int k)
{
    return k == T_MODE || k == T_AT || k == T_INIT || k == T_SOURCE || k == T_PRIORITY;
}

static int is_binop(int k)
{
    return k == '+' || k == '-' || k == '*' || k == '/' || k == '%' || k == T_SHL;
}

/* ---- tokens ---------------------------------------------------------------------- */

static int tokenize(fmt *f, const char *src, size_t len)
{
    char *buf = malloc(len + 1);
    if (!buf)
        return 0;
    memcpy(buf, src, len);
    buf[len] = '\0';
    rp_dctx dc = {NULL, -1, NULL, 0};
    rp_lexer lx;
    memset(&lx, 0, sizeof lx);
    lx.buf = lx.cur = lx.line_start = buf;
    lx.lim = buf + len;
    lx.line = 1;
    lx.dc = &dc;
    lx.keep_comments = 1;
    int ok = 1;
    for (;;) {
        RP_STYPE v;
        RP_LTYPE l;
        memset(&v, 0, sizeof v);
        int k = rp_lex(&v, &l, &lx);
        if (k == T_IDENT || k == T_STRING || k == T_LOCLIT)
            free(v.s);
        if (k == T_RP_error) { /* the parse that came first found no error: out of memory */
            ok = 0;
            break;
        }
        if (f->nt == f->capt) {
            size_t c = f->capt ? f->capt * 2 : 256;
            ftok *n = realloc(f->t, c * sizeof *n);
            if (!n) {
                ok = 0;
                break;
            }
            f->t = n;
            f->capt = c;
        }
        ftok *t = &f->t[f->nt++];
        t->k = k;
        t->line = l.first_line;
        t->n = (size_t)(lx.cur - lx.tok);
        t->s = src + (lx.tok - buf);
        if (k == T_COMMENT)
            while (t->n > 1 && (t->s[t->n - 1] == ' ' || t->s[t->n - 1] == '\t' ||
                                t->s[t->n - 1] == '\r'))
                t->n--;
        if (k == T_YYEOF)
            break;
    }
    free(buf);
    return ok;
}

/* ---- the item tree --------------------------------------------------------------- */

static void item_free(fitem *it)
{
    for (size_t i = 0; i < it->nkids; i++)
        item_free(&it->kids[i]);
    free(it->kids);
}

static fitem *item_add(fmt *f, fitem *parent)
{
    if (parent->nkids == parent->capkids) {
        size_t c = parent->capkids ? parent->capkids * 2 : 8;
        fitem *n = realloc(parent->kids, c * sizeof *n);
        if (!n) {
            f->nomem = 1;
            return NULL;
        }
        parent->kids = n;
        parent->capkids = c;
    }
    fitem *it = &parent->kids[parent->nkids++];
    memset(it, 0, sizeof *it);
    it->comment = it->open_trail = it->trail = -1;
    return it;
}

/* The next token at or after i that is not a comment. */
static size_t next_code(const fmt *f, size_t i)
{
    while (i < f->nt && f->t[i].k == T_COMMENT)
        i++;
    return i < f->nt ? i : f->nt - 1;
}

/* Reads the items of a block (or of the file) from *i up to its '}' or the end. *prev is
 * the line of the last token read. */
static void parse_items(fmt *f, fitem *parent, size_t *i, uint32_t *prev, int depth)
{
    if (depth > FMT_MAX_DEPTH) {
        f->deep = 1;
        return;
    }
    while (!f->nomem && !f->deep) {
        const ftok *t = &f->t[*i];
        if (t->k == T_YYEOF || t->k == '}')
            return;
        if (t->k == ';') {
            *prev = t->line;
            (*i)++;
            continue;
        }
        if (t->k == T_COMMENT) {
            if (t->line == *prev && parent->nkids && parent->kids[parent->nkids - 1].trail < 0 &&
                parent->kids[parent->nkids - 1].comment < 0) {
                parent->kids[parent->nkids - 1].trail = (int)*i;
            } else if (t->line == *prev && !parent->nkids && depth > 0 && parent->open_trail < 0) {
                parent->open_trail = (int)*i;
            } else {
                fitem *it = item_add(f, parent);
                if (!it)
                    return;
                it->comment = (int)*i;
                it->blank = t->line > *prev + 1;
            }
            *prev = t->line;
            (*i)++;
            continue;
        }
        fitem *it = item_add(f, parent);
        if (!it)
            return;
        it->blank = t->line > *prev + 1;
        it->h0 = *i;
        int pd = 0;
        size_t j = *i;
        for (;; j++) {
            int k = f->t[j].k;
            if (k == T_YYEOF || (k == '}' && pd == 0) || (k == ';' && pd == 0) ||
                (k == '{' && pd == 0) || (j > it->h0 && is_stmt_start(k)))
                break;
            if (k == T_COMMENT) {
                int nk = f->t[next_code(f, j)].k;
                if (nk != '{' && (nk == T_YYEOF || nk == '}' || nk == ';' || is_stmt_start(nk)))
                    break; /* the comment belongs after the statement */
            }
            if (k == '(' || k == '[')
                pd++;
            else if ((k == ')' || k == ']') && pd > 0)
                pd--;
            *prev = f->t[j].line;
        }
        it->h1 = j;
        *i = j;
        if (f->t[j].k == '{') {
            uint32_t open = f->t[j].line;
            it->block = 1;
            *prev = open;
            (*i)++;
            /* the item may move when its siblings grow: work on it by index */
            size_t idx = parent->nkids - 1;
            fitem tmp = *it;
            parse_items(f, &tmp, i, prev, depth + 1);
            it = &parent->kids[idx];
            *it = tmp;
            if (f->t[*i].k == '}') {
                it->one_line_src = f->t[*i].line == open;
                *prev = f->t[*i].line;
                (*i)++;
            }
        }
    }
}

/* ---- text ------------------------------------------------------------------------ */

static int unary_after(int k)
{
    return !(k == T_INT || k == T_IDENT || k == ')' || k == ']' || k == T_STRING);
}

static int spaced(const ftok *a, const ftok *b, int a_unary)
{
    if (b->k == ',' || b->k == ')' || b->k == ']')
        return 0;
    if (a->k == '(' || a->k == '[' || a->k == '.' || b->k == '.')
        return 0;
    if (b->k == '(' && (a->k == T_IDENT || a->k == T_SYNTH || a->k == T_FILE || a->k == T_SEEDED ||
                        a->k == T_FIELDS || a->k == T_LIMBS))
        return 0;
    if (b->k == '[' && a->k == T_IDENT)
        return 0;
    if (a->k == T_DOTDOT || a->k == T_DOTDOTLT || b->k == T_DOTDOT || b->k == T_DOTDOTLT)
        return 0;
    return !a_unary;
}

typedef struct piece {
    size_t tok;
    int space, brk; /* a space before it; a line may break before it (2, else 1) */
} piece;

/* The code tokens of [h0, h1) as pieces, with spacing and break points. */
static size_t pieces(const fmt *f, size_t h0, size_t h1, piece *out)
{
    size_t n = 0;
    int pd = 0, prevk = 0, prev_unary = 0, after_comma = 0;
    const ftok *prev = NULL;
    for (size_t j = h0; j < h1; j++) {
        const ftok *t = &f->t[j];
        if (t->k == T_COMMENT)
            continue;
        int unary = t->k == '-' && (!prev || unary_after(prevk) || is_binop(prevk));
        piece *p = &out[n++];
        p->tok = j;
        p->space = prev ? spaced(prev, t, prev_unary) : 0;
        /* 2: a break point outside parentheses (preferred), 1: after a comma inside */
        p->brk = !prev ? 0
                 : pd == 0 && (is_attr(t->k) || t->k == T_FROM || t->k == T_STRING ||
                               (is_binop(t->k) && !unary))
                     ? 2
                 : after_comma ? 1
                               : 0;
        after_comma = t->k == ',';
        if (t->k == '(' || t->k == '[')
            pd++;
        else if ((t->k == ')' || t->k == ']') && pd > 0)
            pd--;
        prev = t;
        prevk = t->k;
        prev_unary = unary;
    }
    return n;
}

static char *join(const fmt *f, const piece *p, size_t a, size_t b)
{
    rp_out o = {0};
    rp_out_put(&o, "", 0);
    for (size_t i = a; i < b; i++) {
        if (i > a && p[i].space)
            rp_out_put(&o, " ", 1);
        rp_out_put(&o, f->t[p[i].tok].s, f->t[p[i].tok].n);
    }
    if (o.fail) {
        free(o.s);
        return NULL;
    }
    return o.s;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static oline *line_add(fmt *f, size_t indent, char *code, int blank)
{
    if (!code) {
        f->nomem = 1;
        return NULL;
    }
    if (f->nl == f->capl) {
        size_t c = f->capl ? f->capl * 2 : 64;
        oline *n = realloc(f->l, c * sizeof *n);
        if (!n) {
            free(code);
            f->nomem = 1;
            return NULL;
        }
        f->l = n;
        f->capl = c;
    }
    oline *l = &f->l[f->nl++];
    memset(l, 0, sizeof *l);
    l->indent = indent;
    l->code = code;
    l->blank = blank;
    return l;
}

static void set_comment(fmt *f, oline *l, int tok)
{
    if (!l || tok < 0)
        return;
    l->comment = dupn(f->t[tok].s, f->t[tok].n);
    if (!l->comment)
        f->nomem = 1;
}

static int has_comment(const fmt *f, const fitem *it)
{
    if (it->comment >= 0 || it->trail >= 0 || it->open_trail >= 0)
        return 1;
    for (size_t j = it->h0; j < it->h1; j++)
        if (f->t[j].k == T_COMMENT)
            return 1;
    for (size_t i = 0; i < it->nkids; i++)
        if (has_comment(f, &it->kids[i]))
            return 1;
    return 0;
}

/* A block written on one line: one statement per level, no comments, one source line. */
static int one_line_ok(const fmt *f, const fitem *it)
{
    if (!it->block)
        return 1;
    if (!it->one_line_src || it->nkids > 1 || has_comment(f, it))
        return 0;
    return it->nkids == 0 || one_line_ok(f, &it->kids[0]);
}

static void flat(fmt *f, const fitem *it, rp_out *o, piece *pc)
{
    size_t n = pieces(f, it->h0, it->h1, pc);
    char *h = join(f, pc, 0, n);
    if (!h) {
        f->nomem = 1;
        return;
    }
    rp_out_puts(o, h);
    free(h);
    if (it->block) {
        if (it->nkids) {
            rp_out_puts(o, " { ");
            flat(f, &it->kids[0], o, pc);
            rp_out_puts(o, " }");
        } else {
            rp_out_puts(o, " {}");
        }
    }
}

/* A value declaration's columns: "value NAME[DIM]", "= SIZE", the first attribute, the
 * rest. 0 when the header is not one. */
static int value_cells(fmt *f, const fitem *it, const piece *pc, size_t n, oline *l)
{
    if (f->t[it->h0].k != T_VALUE || it->block)
        return 0;
    size_t eq = n, a1 = n, a2 = n;
    int pd = 0;
    for (size_t i = 0; i < n; i++) {
        int k = f->t[pc[i].tok].k;
        if (k == '(' || k == '[')
            pd++;
        else if (k == ')' || k == ']')
            pd--;
        else if (k == '=' && pd == 0 && eq == n)
            eq = i;
        else if (pd == 0 && is_attr(k) && eq < n) {
            if (a1 == n)
                a1 = i;
            else if (a2 == n)
                a2 = i;
        }
    }
    if (eq == n)
        return 0;
    size_t cut[5] = {0, eq, a1, a2, n};
    int nc = 0;
    for (int c = 0; c < 4; c++) {
        if (cut[c] >= cut[c + 1])
            break;
        l->cells[c] = join(f, pc, cut[c], cut[c + 1]);
        if (!l->cells[c]) {
            f->nomem = 1;
            return 0;
        }
        nc = c + 1;
    }
    l->ncells = nc;
    return 1;
}

/* A statement without a block: one line, or wrapped before its break points. */
static void emit_simple(fmt *f, const fitem *it, size_t indent, int blank, piece *pc)
{
    size_t n = pieces(f, it->h0, it->h1, pc);
    int mid_comment = 0;
    for (size_t j = it->h0; j < it->h1; j++)
        mid_comment |= f->t[j].k == T_COMMENT;
    if (!mid_comment) {
        char *s = join(f, pc, 0, n);
        if (s && (indent + strlen(s) <= FMT_WIDTH || n < 2)) {
            oline *l = line_add(f, indent, s, blank);
            if (l) {
                value_cells(f, it, pc, n, l);
                set_comment(f, l, it->trail);
            }
            return;
        }
        free(s);
    }
    /* wrap: greedy, breaking at the last break point that keeps the line within
     * FMT_WIDTH; a comment inside the statement ends its line */
    size_t start = 0, ind = indent;
    size_t ci = it->h0; /* next header token to check for comments */
    oline *last = NULL;
    while (start < n && !f->nomem) {
        size_t len = 0, end = start, lastbrk = 0, lastbrk2 = 0;
        int cmt = -1;
        for (size_t i = start; i < n; i++) {
            /* a comment before piece i ends the line here */
            for (; ci < pc[i].tok; ci++)
                if (f->t[ci].k == T_COMMENT && i > start) {
                    cmt = (int)ci;
                    break;
                }
            if (cmt >= 0)
                break;
            size_t w = (i > start && pc[i].space ? 1 : 0) + f->t[pc[i].tok].n;
            if (i > start && pc[i].brk)
                lastbrk = i;
            if (i > start && pc[i].brk == 2)
                lastbrk2 = i;
            if (i > start && ind + len + w > FMT_WIDTH && lastbrk > start) {
                end = lastbrk2 > start ? lastbrk2 : lastbrk;
                break;
            }
            len += w;
            end = i + 1;
        }
        if (cmt >= 0)
            end = end > start ? end : start + 1;
        last = line_add(f, ind, join(f, pc, start, end), start == 0 ? blank : 0);
        if (cmt >= 0) {
            /* every comment up to the next piece: one after code on its line stays there;
             * one on a line of its own keeps a line of its own, indented as what follows */
            size_t stop = end < n ? pc[end].tok : it->h1;
            for (size_t j = (size_t)cmt; j < stop && !f->nomem; j++) {
                if (f->t[j].k != T_COMMENT)
                    continue;
                if (j == (size_t)cmt && f->t[j].line == f->t[j - 1].line && last)
                    set_comment(f, last, (int)j);
                else
                    set_comment(f, line_add(f, indent + FMT_CONT, dupn("", 0), 0), (int)j);
            }
            ci = stop;
        }
        if (end < n)
            ci = ci > pc[end].tok ? ci : pc[end].tok;
        start = end;
        ind = indent + FMT_CONT;
    }
    /* comments after the last code token of the header (before a block's '{'), then the
     * statement's trailing comment: each on the last line, or on a line of its own */
    for (size_t j = ci; j <= it->h1 && !f->nomem; j++) {
        int tok = j < it->h1 ? (f->t[j].k == T_COMMENT ? (int)j : -1) : it->trail;
        if (tok < 0)
            continue;
        if (last && !last->comment)
            set_comment(f, last, tok);
        else
            set_comment(f, line_add(f, ind, dupn("", 0), 0), tok);
    }
}

static void emit_items(fmt *f, const fitem *parent, size_t depth, piece *pc);

static void emit_item(fmt *f, const fitem *it, size_t depth, int blank, piece *pc)
{
    size_t indent = depth * FMT_INDENT;
    if (it->comment >= 0) {
        oline *l = line_add(f, indent, dupn("", 0), blank);
        set_comment(f, l, it->comment);
        return;
    }
    if (!it->block) {
        emit_simple(f, it, indent, blank, pc);
        return;
    }
    if (one_line_ok(f, it)) {
        rp_out o = {0};
        rp_out_put(&o, "", 0);
        flat(f, it, &o, pc);
        if (o.fail)
            f->nomem = 1;
        if (!o.fail && indent + o.n <= FMT_WIDTH) {
            oline *l = line_add(f, indent, o.s, blank);
            set_comment(f, l, it->trail);
            return;
        }
        free(o.s);
    }
    /* the header, then the block */
    fitem h = *it;
    h.block = 0;
    h.trail = -1;
    size_t before = f->nl;
    emit_simple(f, &h, indent, blank, pc);
    if (f->nomem || f->nl == before)
        return;
    oline *l = &f->l[f->nl - 1];
    size_t cl = strlen(l->code);
    char *c = realloc(l->code, cl + 3);
    if (!c) {
        f->nomem = 1;
        return;
    }
    memcpy(c + cl, cl ? " {" : "{", cl ? 3 : 2);
    l->code = c;
    if (l->ncells) { /* not a value declaration: no columns */
        for (int i = 0; i < l->ncells; i++)
            free(l->cells[i]);
        l->ncells = 0;
    }
    if (!l->comment)
        set_comment(f, l, it->open_trail);
    else if (it->open_trail >= 0) {
        oline *cl2 = line_add(f, indent + FMT_INDENT, dupn("", 0), 0);
        set_comment(f, cl2, it->open_trail);
    }
    emit_items(f, it, depth + 1, pc);
    oline *e = line_add(f, indent, dupn("}", 1), 0);
    set_comment(f, e, it->trail);
}

static void emit_items(fmt *f, const fitem *parent, size_t depth, piece *pc)
{
    for (size_t i = 0; i < parent->nkids && !f->nomem; i++)
        emit_item(f, &parent->kids[i], depth, i > 0 && parent->kids[i].blank, pc);
}

/* ---- columns and output ---------------------------------------------------------- */

/* Consecutive value declarations at one indent (no blank or comment line between) share
 * their columns, unless that would take one past FMT_WIDTH. */
static void align_values(fmt *f)
{
    for (size_t a = 0; a < f->nl;) {
        if (!f->l[a].ncells) {
            a++;
            continue;
        }
        size_t b = a + 1;
        while (b < f->nl && f->l[b].ncells && !f->l[b].blank && f->l[b].indent == f->l[a].indent)
            b++;
        size_t w[4] = {0, 0, 0, 0};
        for (size_t i = a; i < b; i++)
            for (int c = 0; c + 1 < f->l[i].ncells; c++) {
                size_t n = strlen(f->l[i].cells[c]);
                if (n > w[c])
                    w[c] = n;
            }
        int fits = 1;
        for (size_t i = a; i < b; i++) {
            size_t tot = f->l[i].indent;
            for (int c = 0; c < f->l[i].ncells; c++)
                tot += (c + 1 < f->l[i].ncells ? w[c] : strlen(f->l[i].cells[c])) + (c > 0);
            fits &= tot <= FMT_WIDTH;
        }
        for (size_t i = a; i < b && fits && b - a > 1; i++) {
            rp_out o = {0};
            rp_out_put(&o, "", 0);
            for (int c = 0; c < f->l[i].ncells; c++) {
                if (c)
                    rp_out_put(&o, " ", 1);
                rp_out_puts(&o, f->l[i].cells[c]);
                if (c + 1 < f->l[i].ncells)
                    for (size_t k = strlen(f->l[i].cells[c]); k < w[c]; k++)
                        rp_out_put(&o, " ", 1);
            }
            if (o.fail) {
                free(o.s);
                f->nomem = 1;
                return;
            }
            free(f->l[i].code);
            f->l[i].code = o.s;
        }
        a = b;
    }
}

static void write_out(fmt *f, rp_out *o)
{
    align_values(f);
    /* trailing comments of consecutive lines at one indent start in one column */
    size_t col = 0;
    for (size_t i = 0; i < f->nl; i++) {
        oline *l = &f->l[i];
        int trailing = l->comment && l->code[0];
        if (trailing && (i == 0 || !f->l[i - 1].comment || !f->l[i - 1].code[0] || l->blank ||
                         f->l[i - 1].indent != l->indent)) {
            col = 0;
            for (size_t j = i; j < f->nl; j++) {
                const oline *m = &f->l[j];
                if (!m->comment || !m->code[0] || (j > i && (m->blank || m->indent != l->indent)))
                    break;
                size_t w = m->indent + strlen(m->code) + 2;
                if (w > col)
                    col = w;
            }
        }
        if (l->blank)
            rp_out_put(o, "\n", 1);
        size_t w = 0;
        if (l->code[0] || l->comment) {
            for (size_t k = 0; k < l->indent; k++)
                rp_out_put(o, " ", 1);
            w = l->indent;
        }
        rp_out_puts(o, l->code);
        w += strlen(l->code);
        if (trailing)
            for (; w < col; w++)
                rp_out_put(o, " ", 1);
        if (l->comment)
            rp_out_puts(o, l->comment);
        rp_out_put(o, "\n", 1);
    }
}

fhr_status rplan_format(const char *src, size_t len, const char *filename, char **out,
                        rplan_diags *diags)
{
    if (!out || (!src && len))
        return FHR_E_INVALID;
    *out = NULL;
    if (!src)
        src = "";
    const char *fname = filename ? filename : "<input>";
    /* the source must parse: a file with syntax errors is not formatted */
    rp_dctx dc = {diags, -1, fname, 0};
    dc.src = rp_diags_add_source(diags, fname, src, len);
    char *buf = malloc(len + 1);
    if (!buf)
        return FHR_E_NOMEM;
    memcpy(buf, src, len);
    buf[len] = '\0';
    rp_parser ps;
    memset(&ps, 0, sizeof ps);
    ps.dc = &dc;
    ps.lx.buf = ps.lx.cur = ps.lx.line_start = buf;
    ps.lx.lim = buf + len;
    ps.lx.line = 1;
    ps.lx.dc = &dc;
    rp_parse_run(&ps);
    rp_node_free(ps.root);
    free(buf);
    if (dc.nerrors)
        return FHR_E_INVALID;

    fmt f;
    memset(&f, 0, sizeof f);
    fitem root;
    memset(&root, 0, sizeof root);
    root.comment = root.open_trail = root.trail = -1;
    fhr_status st = FHR_OK;
    piece *pc = NULL;
    if (!tokenize(&f, src, len)) {
        st = FHR_E_NOMEM;
        goto done;
    }
    pc = malloc(f.nt * sizeof *pc);
    if (!pc) {
        st = FHR_E_NOMEM;
        goto done;
    }
    size_t i = 0;
    uint32_t prev = 0;
    parse_items(&f, &root, &i, &prev, 0);
    if (f.deep) {
        rp_diag(&dc, RPLAN_ERROR, (rp_loc){f.t[i].line, 1, f.t[i].line, 1},
                "blocks are nested too deeply to format (at most %d levels)", FMT_MAX_DEPTH);
        st = FHR_E_INVALID;
        goto done;
    }
    emit_items(&f, &root, 0, pc);
    rp_out o = {0};
    rp_out_put(&o, "", 0);
    if (!f.nomem)
        write_out(&f, &o);
    if (f.nomem || o.fail) {
        free(o.s);
        st = FHR_E_NOMEM;
        goto done;
    }
    *out = o.s;
done:
    for (size_t k = 0; k < f.nl; k++) {
        free(f.l[k].code);
        free(f.l[k].comment);
        for (int c = 0; c < f.l[k].ncells; c++)
            free(f.l[k].cells[c]);
    }
    free(f.l);
    free(pc);
    item_free(&root);
    free(f.t);
    return st;
}
