/* runtime/program/text.c — what text a program may carry and show: well-formed UTF-8
 * without control characters (C0, DEL, C1) or bidirectional overrides, so names reach
 * JSON output, terminals and HTML as they were written. */
#include "runtime/program/program.h"

/* Length of the well-formed UTF-8 sequence at s (n bytes left), or 0. */
static size_t seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    unsigned lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f; /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return k;
}

size_t rp_utf8_seq(const char *s, size_t n)
{
    return n ? seq_len((const unsigned char *)s, n) : 0;
}

size_t rp_text_bad(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x20 ? u[i] != '\t' : u[i] == 0x7f)
            return i;
        size_t k = seq_len(u + i, n - i);
        if (!k)
            return i;
        /* C1 controls (U+0080..U+009F) and the bidirectional embeddings, overrides and
         * isolates (U+202A..U+202E, U+2066..U+2069), which reorder what a reader sees */
        if (k == 2 && u[i] == 0xc2 && u[i + 1] < 0xa0)
            return i;
        if (k == 3 && u[i] == 0xe2 &&
            ((u[i + 1] == 0x80 && u[i + 2] >= 0xaa && u[i + 2] <= 0xae) ||
             (u[i + 1] == 0x81 && u[i + 2] >= 0xa6 && u[i + 2] <= 0xa9)))
            return i;
        i += k;
    }
    return n;
}

void rp_text_clean(char *s, size_t n)
{
    for (size_t i = rp_text_bad(s, n); i < n; i = i + 1 + rp_text_bad(s + i + 1, n - i - 1)) {
        s[i] = '?';
        /* the rest of a broken sequence is replaced byte by byte as it comes */
    }
}
