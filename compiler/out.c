/* compiler/out.c — the text sink of out.h: writes through to a FILE, or appends to a
 * string that doubles as it grows; either way it remembers when a write failed. */
#include "compiler/out.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void rp_out_put(rp_out *o, const char *p, size_t n)
{
    if (o->fail)
        return;
    if (o->f) {
        if (n && fwrite(p, 1, n, o->f) != n)
            o->fail = 1;
        return;
    }
    if (o->n + n + 1 > o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 256;
        while (nc < o->n + n + 1)
            nc *= 2;
        char *s = realloc(o->s, nc);
        if (!s) {
            o->fail = 1;
            return;
        }
        o->s = s;
        o->cap = nc;
    }
    memcpy(o->s + o->n, p, n);
    o->n += n;
    o->s[o->n] = '\0';
}

void rp_out_puts(rp_out *o, const char *s) { rp_out_put(o, s, strlen(s)); }

void rp_out_printf(rp_out *o, const char *fmt, ...)
{
    char buf[1024];
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) {
        o->fail = 1;
    } else if ((size_t)n < sizeof buf) {
        rp_out_put(o, buf, (size_t)n);
    } else { /* longer than the buffer: format it again into one that fits */
        char *big = malloc((size_t)n + 1);
        if (big && vsnprintf(big, (size_t)n + 1, fmt, again) == n)
            rp_out_put(o, big, (size_t)n);
        else
            o->fail = 1;
        free(big);
    }
    va_end(again);
}
