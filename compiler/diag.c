/* compiler/diag.c — the diagnostic list: records with file, line, column and span,
 * rendering with the source line and a ^~~~ underline (nftables erec / jq locfile
 * style), and "did you mean" suggestions by edit distance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/out.h"
#include "compiler/lang.h"
#include "runtime/program/program.h"

typedef struct dsrc {
    char *name;
    char *text; /* NULL when unknown */
    size_t len;
    size_t *ls; /* line starts, built on first render */
    size_t nls;
} dsrc;

struct rplan_diags {
    rplan_diag *v;
    int *vsrc;
    size_t n, cap, nerr;
    dsrc *srcs;
    size_t nsrcs;
};

rplan_diags *rplan_diags_new(void)
{
    return calloc(1, sizeof(rplan_diags));
}

void rplan_diags_free(rplan_diags *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free((char *)d->v[i].message);
    for (size_t i = 0; i < d->nsrcs; i++) {
        free(d->srcs[i].name);
        free(d->srcs[i].text);
        free(d->srcs[i].ls);
    }
    free(d->srcs);
    free(d->v);
    free(d->vsrc);
    free(d);
}

size_t rplan_diags_count(const rplan_diags *d) { return d ? d->n : 0; }
size_t rplan_diags_nerrors(const rplan_diags *d) { return d ? d->nerr : 0; }

const rplan_diag *rplan_diags_get(const rplan_diags *d, size_t i)
{
    return d && i < d->n ? &d->v[i] : NULL;
}

int rp_diags_add_source(rplan_diags *d, const char *name, const char *text, size_t len)
{
    if (!d)
        return -1;
    dsrc *s = realloc(d->srcs, (d->nsrcs + 1) * sizeof *s);
    if (!s)
        return -1;
    d->srcs = s;
    dsrc *ns = &s[d->nsrcs];
    memset(ns, 0, sizeof *ns);
    ns->name = strdup(name ? name : "<input>");
    if (!ns->name)
        return -1;
    if (text) {
        ns->text = malloc(len + 1);
        if (!ns->text) {
            free(ns->name);
            return -1;
        }
        memcpy(ns->text, text, len);
        ns->text[len] = '\0';
        ns->len = len;
    }
    return (int)d->nsrcs++;
}

int rp_diags_add_error_at(rplan_diags *d, const char *file, const char *text, size_t len,
                          uint32_t line, uint32_t col, const char *msg)
{
    rp_dctx dc = {d, rp_diags_add_source(d, file, text, text ? len : 0), file, 0};
    if (dc.src < 0)
        return -1;
    if (!text)
        line = col = 0;
    size_t n = rplan_diags_count(d);
    rp_diag(&dc, RPLAN_ERROR, (rp_loc){line, col, line, col}, "%s", msg);
    return rplan_diags_count(d) > n ? 0 : -1;
}

const char *rp_diags_source_name(rplan_diags *d, int src)
{
    if (!d || src < 0 || (size_t)src >= d->nsrcs)
        return "<input>";
    return d->srcs[src].name;
}

void rp_diags_remove_from(rplan_diags *d, size_t from, size_t to)
{
    if (!d || from >= to || to > d->n)
        return;
    for (size_t i = from; i < to; i++) {
        if (d->v[i].severity == RPLAN_ERROR)
            d->nerr--;
        free((char *)d->v[i].message);
    }
    memmove(&d->v[from], &d->v[to], (d->n - to) * sizeof *d->v);
    memmove(&d->vsrc[from], &d->vsrc[to], (d->n - to) * sizeof *d->vsrc);
    d->n -= to - from;
}

void rp_vdiag(rp_dctx *dc, rplan_severity sev, rp_loc loc, const char *fmt, va_list ap)
{
    if (sev == RPLAN_ERROR)
        dc->nerrors++;
    rplan_diags *d = dc->d;
    if (!d)
        return;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 16;
        rplan_diag *v = realloc(d->v, nc * sizeof *v);
        if (!v)
            return;
        d->v = v;
        int *vs = realloc(d->vsrc, nc * sizeof *vs);
        if (!vs)
            return;
        d->vsrc = vs;
        d->cap = nc;
    }
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    rp_text_clean(buf, strlen(buf)); /* names quoted from bad text stay printable and JSON-safe */
    char *msg = strdup(buf);
    if (!msg)
        return;
    rplan_diag *g = &d->v[d->n];
    g->severity = sev;
    g->file = dc->src >= 0 && (size_t)dc->src < d->nsrcs ? d->srcs[dc->src].name
              : dc->file                                 ? dc->file
                                                         : "<input>";
    g->line = loc.first_line;
    g->col = loc.first_column;
    g->end_col = loc.last_line == loc.first_line && loc.last_column >= loc.first_column
                     ? loc.last_column + 1
                     : 0; /* 0: to the end of the line */
    g->message = msg;
    g->end_line = loc.first_line ? (loc.last_line >= loc.first_line ? loc.last_line : loc.first_line) : 0;
    g->end_column = !loc.first_line                                     ? 0
                    : g->end_line == loc.first_line && loc.last_column < loc.first_column
                        ? loc.first_column + 1
                        : loc.last_column + 1;
    d->vsrc[d->n] = dc->src;
    d->n++;
    if (sev == RPLAN_ERROR)
        d->nerr++;
}

void rp_diag(rp_dctx *dc, rplan_severity sev, rp_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rp_vdiag(dc, sev, loc, fmt, ap);
    va_end(ap);
}

static int build_lines(dsrc *s)
{
    if (s->ls || !s->text)
        return s->ls != NULL;
    /* lines end at \n, \r\n or a lone \r, as the lexer counts them */
    size_t n = 1;
    for (size_t i = 0; i < s->len; i++)
        n += s->text[i] == '\n' || (s->text[i] == '\r' && (i + 1 == s->len || s->text[i + 1] != '\n'));
    s->ls = malloc(n * sizeof *s->ls);
    if (!s->ls)
        return 0;
    s->ls[0] = 0;
    s->nls = 1;
    for (size_t i = 0; i < s->len; i++)
        if (s->text[i] == '\n' || (s->text[i] == '\r' && (i + 1 == s->len || s->text[i + 1] != '\n')))
            s->ls[s->nls++] = i + 1;
    return 1;
}

/* The longest source excerpt shown under a diagnostic, in bytes. */
#define EXCERPT_MAX 240

static void render(rplan_diags *d, rp_out *o, int colour)
{
    static const char *const sevname[] = {"error", "warning", "note"};
    static const char *const sevcol[] = {"\033[1;31m", "\033[1;35m", "\033[1;36m"};
    char buf[64];
    for (size_t i = 0; i < d->n; i++) {
        const rplan_diag *g = &d->v[i];
        if (colour)
            rp_out_puts(o, "\033[1m");
        rp_out_puts(o, g->file);
        if (g->line) {
            snprintf(buf, sizeof buf, ":%u:%u", g->line, g->col);
            rp_out_puts(o, buf);
        }
        rp_out_puts(o, ": ");
        if (colour)
            rp_out_puts(o, sevcol[g->severity]);
        rp_out_puts(o, sevname[g->severity]);
        rp_out_puts(o, ":");
        if (colour)
            rp_out_puts(o, "\033[0m");
        rp_out_puts(o, " ");
        rp_out_puts(o, g->message);
        rp_out_puts(o, "\n");
        int si = d->vsrc[i];
        if (!g->line || si < 0 || (size_t)si >= d->nsrcs)
            continue;
        dsrc *s = &d->srcs[si];
        if (!build_lines(s) || g->line > s->nls)
            continue;
        size_t a = s->ls[g->line - 1], b = a;
        while (b < s->len && s->text[b] != '\n' && s->text[b] != '\r')
            b++;
        size_t ll = b - a;
        size_t c0 = g->col ? g->col - 1 : 0;
        if (c0 > ll)
            c0 = ll;
        size_t c1 = g->end_col ? g->end_col - 1 : ll;
        if (c1 > ll)
            c1 = ll;
        if (c1 <= c0)
            c1 = c0 + 1;
        /* a long line is clipped to a window around the caret, "..." marking the cuts */
        size_t w0 = 0, w1 = ll;
        if (ll > EXCERPT_MAX) {
            w0 = c0 > EXCERPT_MAX / 3 ? c0 - EXCERPT_MAX / 3 : 0;
            w1 = w0 + EXCERPT_MAX < ll ? w0 + EXCERPT_MAX : ll;
            if (c1 > w1)
                c1 = w1 > c0 ? w1 : c0 + 1;
            while (w0 > 0 && ((unsigned char)s->text[a + w0] & 0xc0) == 0x80)
                w0--; /* not inside a UTF-8 character */
            while (w1 < ll && ((unsigned char)s->text[a + w1] & 0xc0) == 0x80)
                w1++;
        }
        const char *pre = w0 ? "..." : "";
        /* the excerpt as text: control bytes and broken UTF-8 become '?' (one column each) */
        char *ex = malloc(w1 - w0 + 1);
        if (ex) {
            memcpy(ex, s->text + a + w0, w1 - w0);
            rp_text_clean(ex, w1 - w0);
            rp_out_puts(o, pre);
            rp_out_put(o, ex, w1 - w0);
            if (w1 < ll)
                rp_out_puts(o, "...");
            free(ex);
        }
        rp_out_puts(o, "\n");
        rp_out_puts(o, w0 ? "   " : "");
        for (size_t k = w0; k < c0; k++)
            rp_out_put(o, s->text[a + k] == '\t' ? "\t" : " ", 1);
        if (colour)
            rp_out_puts(o, "\033[1;32m");
        rp_out_puts(o, "^");
        for (size_t k = c0 + 1; k < c1; k++)
            rp_out_puts(o, "~");
        if (colour)
            rp_out_puts(o, "\033[0m");
        rp_out_puts(o, "\n");
    }
}

int rplan_diags_render(const rplan_diags *d, FILE *f, int colour)
{
    if (!d || !f)
        return -1;
    rp_out o = {.f = f};
    render((rplan_diags *)d, &o, colour);
    return o.fail || ferror(f) ? -1 : 0;
}

char *rplan_diags_render_string(const rplan_diags *d)
{
    rp_out o = {0};
    rp_out_put(&o, "", 0);
    if (d)
        render((rplan_diags *)d, &o, 0);
    if (o.fail) {
        free(o.s);
        return NULL;
    }
    return o.s;
}

size_t rp_edit_distance(const char *a, const char *b, size_t cap)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return cap + 1;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0], best;
        row[0] = i;
        best = row[0];
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t v = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < v)
                v = row[j] + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            prev = cur;
            if (v < best)
                best = v;
        }
        if (best > cap)
            return cap + 1;
    }
    return row[lb];
}

const char *rp_suggest(const char *word, const char *const *cands, size_t n)
{
    size_t lw = strlen(word);
    size_t cap = lw <= 3 ? 1 : lw <= 6 ? 2 : 3;
    const char *best = NULL;
    size_t bd = cap + 1;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], word) == 0)
            continue;
        size_t dd = rp_edit_distance(word, cands[i], cap);
        if (dd < bd && dd < lw) {
            bd = dd;
            best = cands[i];
        }
    }
    return best;
}
