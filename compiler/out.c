/* compiler/out.c — the text sink of out.h: writes through to a FILE, or appends to a
 * string that doubles as it grows and remembers when it could not. */
#include "compiler/out.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void rp_out_put(rp_out *o, const char *p, size_t n)
{
    if (o->f) {
        fwrite(p, 1, n, o->f);
        return;
    }
    if (o->fail)
        return;
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
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= 0)
        rp_out_put(o, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}
