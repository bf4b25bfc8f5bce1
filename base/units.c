/* base/units.c — the one size formatter (units.h): exact units for disassembly and
 * verifier messages, rounded ones for the command's reports. */
#include "base/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *fhr_size_format(uint64_t n, fhr_size_style style, char *buf, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (style == FHR_SIZE_EXACT) {
        for (int i = 4; i > 0; i--) {
            uint64_t m = 1ull << (10 * i);
            if (n >= m && n % m == 0) {
                snprintf(buf, cap, "%" PRIu64 " %s", n / m, unit[i]);
                return buf;
            }
        }
        snprintf(buf, cap, "%" PRIu64 " B", n);
        return buf;
    }
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, cap, "%" PRIu64 " B", n);
    else
        snprintf(buf, cap, "%.4g %s", v, unit[i]);
    return buf;
}

/* ---- reading ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    unsigned shift;
} size_units[] = {{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int same_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (lower((unsigned char)*a) != lower((unsigned char)*b))
            return 0;
    return *a == *b;
}

const char *fhr_unit_guess(const char *word)
{
    static const char *const sizes[] = {"KiB", "MiB", "GiB", "TiB"};
    static const char *const prefixes = "kmgt";
    if (!word || !*word)
        return NULL;
    const char *guess = NULL;
    const char *p = strchr(prefixes, lower((unsigned char)word[0]));
    /* K, KB, Kb, KiB in any case, Kbyte(s): a power-of-1024 size unit */
    if (p && *p) {
        const char *r = word + 1;
        if (!*r || same_nocase(r, "b") || same_nocase(r, "ib") || same_nocase(r, "i") ||
            same_nocase(r, "byte") || same_nocase(r, "bytes"))
            guess = sizes[p - prefixes];
    }
    if (!guess && (same_nocase(word, "b") || same_nocase(word, "byte") ||
                   same_nocase(word, "bytes")))
        guess = "B";
    /* durations */
    static const struct {
        const char *w, *u;
    } dur[] = {{"sec", "s"},   {"secs", "s"},  {"second", "s"}, {"seconds", "s"},
               {"msec", "ms"}, {"msecs", "ms"}, {"usec", "us"},  {"usecs", "us"},
               {"\xc2\xb5s", "us"}, {"nsec", "ns"}, {"nsecs", "ns"}};
    for (size_t i = 0; !guess && i < sizeof dur / sizeof dur[0]; i++)
        if (same_nocase(word, dur[i].w))
            guess = dur[i].u;
    if (!guess && !strcmp(word, "S"))
        guess = "s";
    if (!guess && (!strcmp(word, "MS") || !strcmp(word, "Ms")))
        guess = "ms";
    return guess && strcmp(guess, word) ? guess : NULL;
}

/* NUMBER at s: the whole part in *whole (0 when it starts at '.'), the fraction's digits
 * (at most 18 kept) in *frac over *scale10; the end in *end. 0, -1 when malformed, or
 * -2 when the whole part does not fit 64 bits. */
static int number(const char *s, uint64_t *whole, uint64_t *frac, uint64_t *scale10,
                  const char **end)
{
    const char *p = s;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
            return -2;
    int had_int = p > s;
    *frac = 0;
    *scale10 = 1;
    if (*p == '.') {
        const char *f = ++p;
        for (; *p >= '0' && *p <= '9'; p++)
            if (p - f < 18) {
                *frac = *frac * 10 + (uint64_t)(*p - '0');
                *scale10 *= 10;
            }
        if (p == f)
            return -1;
    } else if (!had_int)
        return -1;
    *whole = v;
    *end = p;
    return 0;
}

static const char bad_number[] = "want a decimal number: digits with an optional fraction, "
                                 "no sign, no exponent";

static int refuse(char *why, size_t cap, const char *msg)
{
    if (why && cap)
        snprintf(why, cap, "%s", msg);
    return -1;
}

int fhr_size_parse(const char *s, uint64_t *out, char *why, size_t cap)
{
    static const char no_unit[] = "a SIZE needs a unit: B, KiB, MiB, GiB or TiB";
    static const char too_big[] = "a SIZE must be below 2^64 bytes";
    static const char not_whole[] = "a SIZE must be a whole number of bytes";
    uint64_t whole, frac, scale10;
    const char *end;
    int rc = s ? number(s, &whole, &frac, &scale10, &end) : -1;
    if (rc)
        return refuse(why, cap, rc == -2 ? too_big : bad_number);
    while (*end == ' ')
        end++;
    if (!*end)
        return refuse(why, cap, no_unit);
    size_t u = 0, nu = sizeof size_units / sizeof size_units[0];
    while (u < nu && strcmp(end, size_units[u].name))
        u++;
    if (u == nu) {
        const char *g = fhr_unit_guess(end);
        if (why && cap && strlen(end) < 16) {
            if (g && g[strlen(g) - 1] == 'B')
                snprintf(why, cap, "'%s' is not a unit; did you mean %s? (sizes are powers "
                         "of 1024)", end, g);
            else
                snprintf(why, cap, "'%s' is not a unit (want B, KiB, MiB, GiB or TiB)", end);
            return -1;
        }
        return refuse(why, cap, no_unit);
    }
    unsigned shift = size_units[u].shift;
    if (shift && whole > (UINT64_MAX >> shift))
        return refuse(why, cap, too_big);
    uint64_t v = whole << shift;
    if (frac) {
        unsigned __int128 part = (unsigned __int128)frac << shift;
        if (part % scale10)
            return refuse(why, cap, not_whole);
        part /= scale10;
        if ((uint64_t)part > UINT64_MAX - v)
            return refuse(why, cap, too_big);
        v += (uint64_t)part;
    }
    *out = v;
    return 0;
}

int fhr_rate_parse(const char *s, double *out, char *why, size_t cap)
{
    uint64_t whole, frac, scale10;
    const char *end;
    if (!s || number(s, &whole, &frac, &scale10, &end) != 0 || *end)
        return refuse(why, cap, "want a positive decimal number of GB/s, at most 1e9 (digits "
                                "with an optional fraction, no sign, no exponent)");
    double v = (double)whole + (double)frac / (double)scale10;
    if (!(v > 0) || v > 1e9)
        return refuse(why, cap, "want a positive number of GB/s, at most 1e9");
    *out = v;
    return 0;
}
