/* cli/diff.c — a unified diff of two texts by lines (longest common subsequence, three
 * lines of context), for `fheplan fmt --check`. */
#include "cli/diff.h"

#include <stdlib.h>
#include <string.h>

typedef struct lines {
    const char **p;
    size_t *n;
    size_t count;
    int open; /* the last line has no newline */
} lines;

static int split(const char *s, lines *l)
{
    size_t cap = 1;
    for (const char *q = s; *q; q++)
        cap += *q == '\n';
    l->p = malloc(cap * sizeof *l->p);
    l->n = malloc(cap * sizeof *l->n);
    l->count = 0;
    if (!l->p || !l->n)
        return 0;
    while (*s) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        l->p[l->count] = s;
        l->n[l->count++] = n;
        s += n + (e != NULL);
        l->open = e == NULL;
    }
    return 1;
}

/* 1 when line i has no newline after it (the text's last line, unterminated) */
static int unterminated(const lines *l, size_t i)
{
    return l->open && i + 1 == l->count;
}

/* Lines are alike when their text and their newline are: a missing final newline is a
 * difference the diff shows. */
static int same(const lines *a, size_t i, const lines *b, size_t j)
{
    return a->n[i] == b->n[j] && memcmp(a->p[i], b->p[j], a->n[i]) == 0 &&
           unterminated(a, i) == unterminated(b, j);
}

/* op per output line: ' ' both, '-' a only, '+' b only; with the line's index. */
typedef struct dop {
    char op;
    size_t i;
} dop;

static void put_line(FILE *out, char op, const lines *l, size_t i)
{
    fputc(op, out);
    fwrite(l->p[i], 1, l->n[i], out);
    fputc('\n', out);
    if (unterminated(l, i))
        fputs("\\ No newline at end of file\n", out);
}

int diff_unified(FILE *out, const char *name, const char *a, const char *b)
{
    lines la = {0}, lb = {0};
    dop *ops = NULL;
    unsigned *t = NULL;
    int rc = -1;
    if (!split(a, &la) || !split(b, &lb))
        goto done;
    size_t n = la.count, m = lb.count;
    /* common prefix and suffix first: the table covers only what differs */
    size_t pre = 0, suf = 0;
    while (pre < n && pre < m && same(&la, pre, &lb, pre))
        pre++;
    while (suf < n - pre && suf < m - pre && same(&la, n - 1 - suf, &lb, m - 1 - suf))
        suf++;
    size_t dn = n - pre - suf, dm = m - pre - suf;
    ops = malloc((n + m + 1) * sizeof *ops);
    if (!ops)
        goto done;
    size_t nops = 0;
    for (size_t i = 0; i < pre; i++)
        ops[nops++] = (dop){' ', i};
    if (dn && dm && (dn + 1) * (dm + 1) <= (size_t)1 << 26) {
        t = malloc((dn + 1) * (dm + 1) * sizeof *t);
        if (!t)
            goto done;
#define T(i, j) t[(i) * (dm + 1) + (j)]
        for (size_t i = dn + 1; i-- > 0;)
            for (size_t j = dm + 1; j-- > 0;)
                T(i, j) = i == dn || j == dm ? 0
                          : same(&la, pre + i, &lb, pre + j) ? T(i + 1, j + 1) + 1
                          : T(i + 1, j) > T(i, j + 1) ? T(i + 1, j)
                                                      : T(i, j + 1);
        size_t i = 0, j = 0;
        while (i < dn || j < dm) {
            if (i < dn && j < dm && same(&la, pre + i, &lb, pre + j)) {
                ops[nops++] = (dop){' ', pre + i};
                i++, j++;
            } else if (i < dn && (j == dm || T(i + 1, j) >= T(i, j + 1))) {
                ops[nops++] = (dop){'-', pre + i++};
            } else {
                ops[nops++] = (dop){'+', pre + j++};
            }
        }
#undef T
    } else { /* too large for the table: everything between prefix and suffix replaced */
        for (size_t i = 0; i < dn; i++)
            ops[nops++] = (dop){'-', pre + i};
        for (size_t j = 0; j < dm; j++)
            ops[nops++] = (dop){'+', pre + j};
    }
    for (size_t k = 0; k < suf; k++)
        ops[nops++] = (dop){' ', n - suf + k};
    rc = 0;
    int header = 0;
    for (size_t k = 0; k < nops;) {
        if (ops[k].op == ' ') {
            k++;
            continue;
        }
        /* a hunk: from 3 lines before this change to 3 after the last change within 6 */
        size_t h0 = k >= 3 ? k - 3 : 0, h1 = k;
        for (size_t q = k; q < nops; q++) {
            if (ops[q].op != ' ')
                h1 = q + 1;
            else if (q >= h1 + 6)
                break;
        }
        h1 = h1 + 3 < nops ? h1 + 3 : nops;
        /* line numbers at the hunk's start, counted over ops */
        size_t a0 = 0, b0 = 0, ac = 0, bc = 0;
        for (size_t q = 0; q < h0; q++) {
            a0 += ops[q].op != '+';
            b0 += ops[q].op != '-';
        }
        for (size_t q = h0; q < h1; q++) {
            ac += ops[q].op != '+';
            bc += ops[q].op != '-';
        }
        if (!header) {
            fprintf(out, "--- %s\n+++ %s (formatted)\n", name, name);
            header = 1;
        }
        fprintf(out, "@@ -%zu,%zu +%zu,%zu @@\n", ac ? a0 + 1 : a0, ac, bc ? b0 + 1 : b0, bc);
        for (size_t q = h0; q < h1; q++) {
            if (ops[q].op == '+')
                put_line(out, '+', &lb, ops[q].i);
            else
                put_line(out, ops[q].op, &la, ops[q].i);
        }
        rc = 1;
        k = h1;
    }
done:
    free(la.p);
    free(la.n);
    free(lb.p);
    free(lb.n);
    free(ops);
    free(t);
    return rc;
}
